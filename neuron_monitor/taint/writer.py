"""This node's DeviceTaintRules through the API server: list (adopt), create, update, delete, each call retried
with backoff inside one total deadline.

Every call (`TaintApi.call`) ends within ``deadline`` seconds whole: the attempts share it (each attempt's own
timeout is what is left), and the pauses between them (``backoff``, doubling) are cut to fit. Only what may pass
on its own is tried again: no HTTP answer, 429, 500, 502, 503, 504. A 403 or 422 (RBAC, or the admission policy
refusing the object), 404 and 409 are answered at once. Deletion carries the rule's resourceVersion as a
precondition, so a rule someone changed since it was listed (relabelled, re-targeted) is not deleted.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from neuron_monitor.k8s.kubeapi import KubeApi, KubeApiError
from neuron_monitor.taint.rules import API_GROUP, API_VERSIONS, RESOURCE, OwnRule, own_rule, selector_of

RETRYABLE = frozenset({0, 429, 500, 502, 503, 504})
MAX_PAGES = 8
PAGE_LIMIT = "100"


def explain(e: KubeApiError) -> str:
    """What a failed call means for the operator, in one line."""
    if e.status in (403, 422) and ("ValidatingAdmissionPolicy" in str(e) or "denied request" in str(e)):
        return (
            f"{e} (the admission policy neuron-monitor-taint refused it: rules must name this node's pool and labels)"
        )
    if e.status == 403:
        return f"{e} (RBAC: the service account needs the ClusterRole neuron-monitor-dra-taint)"
    if e.status == 404:
        return f"{e} (is resource.k8s.io DeviceTaintRule served? Kubernetes 1.36 beta, 1.37 stable)"
    return str(e)


def status_reason(e: KubeApiError) -> str:
    """A small label for the error counter: the HTTP status, or ``no_answer``."""
    return str(e.status) if e.status else "no_answer"


class TaintApi:
    def __init__(
        self,
        api: KubeApi,
        node: str,
        driver: str,
        deadline: float = 10.0,
        attempts: int = 4,
        backoff: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.node = node
        self.driver = driver
        self.deadline = deadline
        self.attempts = attempts
        self.backoff = backoff
        self.sleep = sleep
        self.clock = clock
        self.version = API_VERSIONS[0]
        self.retries = 0

    def call(self, method: str, path: str, query: dict[str, str] | None = None, body: Any = None) -> Any:
        """One API call with retries, all within ``deadline`` seconds; raises the last ``KubeApiError``."""
        end = self.clock() + self.deadline
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            left = end - self.clock()
            if left <= 0:
                break
            try:
                return self.api.request(method, path, query, body, timeout=left)
            except KubeApiError as e:
                if e.status not in RETRYABLE or attempt == self.attempts:
                    raise
                pause = min(delay, end - self.clock())
                if pause <= 0:
                    raise KubeApiError(f"{e} (gave up: the {self.deadline:g} s deadline passed)", e.status) from None
                self.retries += 1
                self.sleep(pause)
                delay *= 2
        raise KubeApiError(f"{method} {path}: no answer within the {self.deadline:g} s deadline")

    def _base(self) -> str:
        return f"/apis/{API_GROUP}/{self.version}/{RESOURCE}"

    def list_own(self) -> tuple[dict[tuple[str, str], OwnRule], int]:
        """This node's rules by (pool, device), and how many listed objects were not ours (left alone). Tries
        ``v1`` then ``v1beta2`` when the server answers 404, and keeps the version that answered."""
        last: KubeApiError | None = None
        for version in (self.version, *[v for v in API_VERSIONS if v != self.version]):
            self.version = version
            try:
                return self._list()
            except KubeApiError as e:
                last = e
                if e.status != 404:
                    raise
        assert last is not None
        raise last

    def _list(self) -> tuple[dict[tuple[str, str], OwnRule], int]:
        out: dict[tuple[str, str], OwnRule] = {}
        foreign = 0
        query = {"labelSelector": selector_of(self.node), "limit": PAGE_LIMIT}
        for _ in range(MAX_PAGES):
            answer = self.call("GET", self._base(), query)
            answer = answer if isinstance(answer, dict) else {}
            items = answer.get("items")
            for item in items if isinstance(items, list) else []:
                rule = own_rule(item, self.node, self.driver)
                if rule is None:
                    foreign += 1
                elif (rule.pool, rule.device) not in out:
                    out[(rule.pool, rule.device)] = rule
            meta = answer.get("metadata")
            token = meta.get("continue") if isinstance(meta, dict) else None
            if not isinstance(token, str) or not token:
                break
            query = {**query, "continue": token[:4096]}
        return out, foreign

    def get(self, name: str) -> Any:
        return self.call("GET", f"{self._base()}/{urllib.parse.quote(name)}")

    def create(self, obj: dict[str, Any]) -> Any:
        return self.call("POST", self._base(), body=obj)

    def replace(self, obj: dict[str, Any]) -> Any:
        return self.call("PUT", f"{self._base()}/{urllib.parse.quote(obj['metadata']['name'])}", body=obj)

    def delete(self, rule: OwnRule) -> Any:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if rule.resource_version:
            body["preconditions"] = {"resourceVersion": rule.resource_version}
        return self.call("DELETE", f"{self._base()}/{urllib.parse.quote(rule.name)}", body=body)
