"""`QueryEngineClient` (`state.query_engine_client`): the client's handle on a job's telemetry
HTTP API.

Plain urllib, with proxies bypassed (the API is on loopback). `query(sql)` returns the parsed
`{"rows": [...]}`; an HTTP error carries the server's explanation (a DataFusion parse or plan
error) in its reason, so the message says what is wrong with the query.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

__all__ = ["DEFAULT_QUERY_TIMEOUT_SEC", "QueryEngineClient"]

DEFAULT_QUERY_TIMEOUT_SEC = 10.0


class QueryEngineClient:
    """SQL over a job's telemetry through its HTTP API at `base_url`."""

    def __init__(self, base_url: str, timeout: float = DEFAULT_QUERY_TIMEOUT_SEC) -> None:
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    @property
    def base_url(self) -> str:
        return self._base_url

    def _post(self, path: str, payload: dict[str, Any], timeout: float | None) -> Any:
        request = urllib.request.Request(
            f"{self._base_url}{path}", data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        try:
            with self._opener.open(request, timeout=self._timeout if timeout is None
                                   else timeout) as response:
                return json.loads(response.read().decode())
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")
            err.close()
            raise urllib.error.HTTPError(err.url, err.code, f"{err.reason}: {detail}",
                                         err.headers, None) from err

    def query(self, sql: str, timeout: float | None = None) -> dict[str, Any]:
        """Run `sql` over the job's telemetry: `{"rows": [{column: value}, ...]}`."""
        result = self._post("/api/query", {"sql": sql}, timeout)
        if not isinstance(result, dict) or not isinstance(result.get("rows"), list):
            raise RuntimeError(f"invalid telemetry query response: {result!r}")
        return result

    def store_pyspy_dump(self, dump_id: str, proc_ref: str,
                         pyspy_result_json: str) -> dict[str, Any]:
        """Add a py-spy dump (py-spy's JSON result for proc `proc_ref`) to the pyspy_* tables."""
        result: dict[str, Any] = self._post(
            "/api/pyspy_dump", {"dump_id": dump_id, "proc_ref": proc_ref,
                                "pyspy_result_json": pyspy_result_json}, None)
        return result

    def __repr__(self) -> str:
        return f"QueryEngineClient({self._base_url!r})"
