"""``--capture --redact``: runtime tags, model names and pod names replaced with stable placeholders.

The same original always gets the same placeholder within one capture (``runtime-1``, ``model-1``, ``pod-1``, in
the order first met), so what belongs together stays together. In a data block the process tag
(``nds_process_info_t.tag``), the extended tag and each model record's name are overwritten (zero-padded) and the
record's FNV-1a hash stamped again (a record with hash 0, not yet published, is left as it is), so the block
parses as before. In the capture's report, every string equal to a replaced tag or model name, and every pod,
namespace, container and claim name under ``neuron_k8s_info``, is replaced the same way. Without ``--redact``
the redactor changes nothing.
"""

from __future__ import annotations

from typing import Any

from neuron_monitor.neuron import layout as L

_TAG_AT = L.PROCESS_INFO_OFFSET + 4 + 1  # after the record's hash and framework_type
_TAG_SIZE = 32
_EXT_TAG_AT = L.PROCESS_EXT_OFFSET + 4
_EXT_TAG_SIZE = 256
_NAME_IN_RECORD = 4 + 8  # after the record's hash, model_id and model_node_id
_NAME_SIZE = 256
_K8S_NAME_KEYS = {"pod_name": "pod", "namespace": "namespace", "container_name": "container",
                  "claim_name": "claim", "claim_namespace": "namespace", "pod_uid": "uid"}  # fmt: skip


def _cstr(raw: bytes | bytearray) -> str:
    return bytes(raw).split(b"\x00", 1)[0].decode("utf-8", "replace")


class Redactor:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.names: dict[str, str] = {}  # original -> placeholder
        self._counts: dict[str, int] = {}

    def placeholder(self, kind: str, original: str) -> str:
        if not original:
            return original
        got = self.names.get(original)
        if got is None:
            n = self._counts[kind] = self._counts.get(kind, 0) + 1
            got = self.names[original] = f"{kind}-{n}"
        return got

    def _field(self, block: bytearray, at: int, size: int, kind: str) -> None:
        original = _cstr(block[at : at + size])
        if original:
            new = self.placeholder(kind, original).encode()[: size - 1]
            block[at : at + size] = new.ljust(size, b"\x00")

    @staticmethod
    def _rehash(block: bytearray, start: int, size: int) -> None:
        stored = int.from_bytes(block[start : start + 4], "little")
        if stored:
            block[start : start + 4] = L.record_hash(bytes(block[start : start + size])).to_bytes(4, "little")

    def block(self, block: bytearray) -> None:
        """Replace the tags and model names in one data block (in place)."""
        if not self.enabled or len(block) < L.OBJECTS_END or bytes(block[:4]) != L.NDS_SIGNATURE:
            return
        self._field(block, _TAG_AT, _TAG_SIZE, "runtime")
        self._rehash(block, L.PROCESS_INFO_OFFSET, L.PROCESS_INFO_SIZE)
        self._field(block, _EXT_TAG_AT, _EXT_TAG_SIZE, "runtime")
        self._rehash(block, L.PROCESS_EXT_OFFSET, L.PROCESS_EXT_SIZE)
        bitmap = int.from_bytes(block[L.MODEL_BITMAP_OFFSET : L.MODEL_BITMAP_OFFSET + 8], "little")
        for slot in range(L.MODEL_SLOTS):
            if bitmap & (1 << slot):
                start = L.MODEL_RECORDS_OFFSET + slot * L.MODEL_RECORD_SIZE
                self._field(block, start + _NAME_IN_RECORD, _NAME_SIZE, "model")
                self._rehash(block, start, L.MODEL_RECORD_SIZE)

    def report(self, value: Any, key: str = "", in_k8s: bool = False) -> Any:
        """A copy of a decoded report with the replaced names replaced, and the k8s names."""
        if not self.enabled:
            return value
        if isinstance(value, dict):
            return {k: self.report(v, k, in_k8s or k == "neuron_k8s_info") for k, v in value.items()}
        if isinstance(value, list):
            return [self.report(v, key, in_k8s) for v in value]
        if isinstance(value, str):
            if in_k8s and key in _K8S_NAME_KEYS:
                return self.placeholder(_K8S_NAME_KEYS[key], value)
            return self.names.get(value, value)
        return value
