"""One module per metric group, each defining ``SPEC`` (a ``GroupSpec``): the module is the registration."""
