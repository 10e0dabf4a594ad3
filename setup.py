"""The optional compiled helper (neuron_monitor/_native.c); everything else is configured in pyproject.toml.

``optional=True``: without a C compiler (or Python headers) the install still succeeds and the package runs on the
pure-Python twins of the helper's functions (see docs/performance.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "neuron_monitor._native",
            ["neuron_monitor/_native.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
        )
    ]
)
