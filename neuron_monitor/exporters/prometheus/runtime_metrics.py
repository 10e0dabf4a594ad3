"""Runtime-level groups (``neuron_runtime_data[].report``) -> gauge samples, plus the runtime's counters.

The families and values come from each group's spec (``neuron_monitor/groups/<name>/spec.py``); this module gives them
their runtime and NeuronCore labels (runtime tag, pod, core, device) and adds the ``neuron_runtime`` info metric.
A runtime whose entry carries an ``error`` gets no gauges (as AWS's exporter) but keeps its counters.
"""

from __future__ import annotations

from neuron_monitor.exporters.prometheus.context import ShapeContext
from neuron_monitor.exporters.prometheus.families import INFO
from neuron_monitor.exporters.prometheus.labels import kept_string
from neuron_monitor.exporters.prometheus.ledger import Subject
from neuron_monitor.exporters.prometheus.values import MalformedReport
from neuron_monitor.schema.read import RuntimeEntry
from neuron_monitor.schema.spec import CORE_SCOPE, counter_family, merge_facts

_CORES = ("\0cores",)  # LabelTable suffixes of a core's labels and of the runtime's info (no label value is one)
_INFO = ("\0info",)


class RuntimeShaper:
    """Shapes one runtime entry; ``core_labels`` caches the label tuple of each NeuronCore."""

    def __init__(self, ctx: ShapeContext, entry: RuntimeEntry) -> None:
        self.ctx = ctx
        self.entry = entry
        self.pid, self.tag = kept_string(entry.pid_label), kept_string(entry.tag)
        self.subject: Subject = ("rt", self.tag)
        self._core_labels: dict[str, tuple[str, ...]] = {}
        self.runtime_labels: tuple[str, ...] = ()

    # -- labels -------------------------------------------------------------------------------------------
    def _cores_used(self) -> list[str]:
        """The cores the runtime works on (its pod labels): those it reports activity for, else those holding its
        memory (``RuntimeFacts.cores_in_use``, ``memory_cores``; a group with an ``error`` still tells its own)."""
        ctx = self.ctx
        facts = merge_facts(
            g.spec.runtime_facts(g.data(), None, ctx.cores_per_device) for g in self.entry.groups.values()
        )
        cores = facts.cores_in_use if facts.cores_in_use is not None else facts.memory_cores
        return [str(core) for core in sorted(cores or ())]

    def core_labels(self, core: str) -> tuple[str, ...]:
        labels = self._core_labels.get(core)
        if labels is None:
            ctx = self.ctx
            pod = ctx.pods.core(core) if ctx.k8s else ()
            name = kept_string(core)
            if ctx.core_device_label:
                labels = (*ctx.inst_values, self.tag, *pod, name, ctx.device_of(core))
            else:
                labels = (*ctx.inst_values, self.tag, *pod, name)
            kept = ctx.table.of((), _CORES)  # the same tuple as in the previous report
            same = kept.get(labels)
            if same is None:
                kept[labels] = labels
                ctx.table.size += 1
            else:
                labels = same
            self._core_labels[core] = labels
        return labels

    # -- shaping ------------------------------------------------------------------------------------------
    def shape(self) -> None:
        ctx = self.ctx
        if self.entry.error:
            self._counters()  # no gauges for a runtime in error (as AWS); its counters keep their totals
            return
        pod = ctx.pods.runtime(self._cores_used()) if ctx.k8s else ()
        self.runtime_labels = (*ctx.inst_values, self.tag, *pod)
        if not ctx.limit.take_one():
            return  # the report reached the series limit: this runtime is left out (see ``series_limit``)
        info = ctx.table.of(self.runtime_labels, _INFO)
        labels = info.get(self.pid)
        if labels is None:
            labels = info[self.pid] = (*self.runtime_labels, self.pid)
            ctx.table.size += 1
        ctx.fams.family("neuron_runtime", INFO, "Neuron runtime information", (*ctx.runtime_names, "pid")).samples[
            labels
        ] = 1.0
        for group in self.entry.groups.values():
            if not group.usable:
                continue
            data, problems = group.read()
            ctx.emit(group.spec.gauges(data), self.runtime_labels, self.core_labels)
            if problems:  # checked after the gauges: parts read on demand add their problems while read
                raise MalformedReport(problems.first())
        self._counters()

    def _counters(self) -> None:
        """Emit this runtime's counters as accumulated up to this report."""
        ctx = self.ctx
        if not self.runtime_labels:
            pod = ctx.pods.runtime(self._cores_used()) if ctx.k8s else ()
            self.runtime_labels = (*ctx.inst_values, self.tag, *pod)
        plans = ctx.table.counters(self.runtime_labels)  # each counter's family and (runtime-scoped) labels
        samples_of = ctx.samples_of
        for key, total in ctx.limit.take(ctx.totals.get(self.subject, {})).items():
            plan = plans.get(key)
            if plan is None:
                family = counter_family(key[0])
                if family is None:
                    continue
                plan = plans[key] = (family, None if family.scope == CORE_SCOPE else (*self.runtime_labels, *key[1:]))
                ctx.table.size += 1
            family, labels = plan
            if labels is None:  # the core scope: the core's labels (and the rest of the key)
                core = self.core_labels(key[1])
                labels = core if len(key) == 2 else (*core, *key[2:])
            samples_of(family)[labels] = total
