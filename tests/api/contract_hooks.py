"""Schemathesis hooks of the contract test (loaded by ``st run`` through
``SCHEMATHESIS_HOOKS=tests.api.contract_hooks``): the fuzzer's own token is never revoked.

``$LINEAGE_CONTRACT_PROTECTED_TOKEN`` names the token the fuzzer authenticates with; a
generated ``DELETE /api/v1/tokens/{name}`` for that name goes to another name instead
(a 404), so the rest of the run keeps its admin rights. The fuzzer may revoke any token
it created itself (the stateful links do) and the spare admin token the test made.
"""

from __future__ import annotations

import os

import schemathesis

PROTECTED = os.environ.get("LINEAGE_CONTRACT_PROTECTED_TOKEN", "")


@schemathesis.hook
def before_call(ctx, case, **kwargs):  # type: ignore[no-untyped-def]
    if PROTECTED and case.method.upper() == "DELETE" and (case.path_parameters or {}).get("name") == PROTECTED:
        case.path_parameters = {**case.path_parameters, "name": PROTECTED + "-not-this-one"}
