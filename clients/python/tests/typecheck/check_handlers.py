"""Type-checked by `make lint-python` (mypy --strict), never run: the
handler decorators keep a handler's own type, and refuse a handler of the
wrong signature. Each `# type: ignore[...]` below marks a line mypy must
flag; --strict reports an ignore that is not needed, so this file fails
the check when the decorators accept what they should not."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from typing_extensions import assert_type

import mcpd_grpc
from mcpd_grpc import (
    ApprovalRequest,
    ApprovalResult,
    AuthorizationRequest,
    ElicitationRequest,
    ElicitationResult,
    RootsRequest,
    SamplingRequest,
    SamplingResult,
)


def sync_client(mcpd: mcpd_grpc.Client, req: SamplingRequest) -> None:
    @mcpd.on_sampling
    def sample(req: SamplingRequest) -> SamplingResult:
        return SamplingResult(req.text, model="m")

    # The decorated functions keep their types (not Any).
    assert_type(sample(req), SamplingResult)

    @mcpd.on_sampling()
    def sample_text(req: SamplingRequest) -> str:
        return req.text

    assert_type(sample_text(req), str)

    @mcpd.on_elicitation
    def elicit(req: ElicitationRequest) -> Optional[Dict[str, Any]]:
        return {"name": "Ada"}

    @mcpd.on_elicitation
    def elicit_result(req: ElicitationRequest) -> ElicitationResult:
        return ElicitationResult("cancel")

    @mcpd.on_roots
    def roots(req: RootsRequest) -> List[str]:
        return ["file:///srv"]

    @mcpd.on_authorization
    def consent(req: AuthorizationRequest) -> Optional[str]:
        return None

    @mcpd.on_approval
    def approve(req: ApprovalRequest) -> Union[bool, ApprovalResult]:
        return True

    mcpd.on_sampling(lambda req: req.text)
    mcpd.on_approval(lambda req: req.tool == "mcp__demo__echo")

    # Wrong request types, wrong results, and a coroutine, which the sync
    # Client does not await.
    @mcpd.on_sampling  # type: ignore[type-var]
    def sample_wrong_request(req: ElicitationRequest) -> str:
        return ""

    @mcpd.on_sampling  # type: ignore[type-var]
    def sample_wrong_result(req: SamplingRequest) -> int:
        return 1

    @mcpd.on_approval  # type: ignore[type-var]
    def approve_wrong_result(req: ApprovalRequest) -> str:
        return "yes"

    @mcpd.on_roots  # type: ignore[type-var]
    def roots_wrong_result(req: RootsRequest) -> int:
        return 1

    @mcpd.on_elicitation  # type: ignore[type-var]
    async def elicit_async(req: ElicitationRequest) -> None:
        return None

    @mcpd.on_authorization  # type: ignore[type-var]
    def consent_no_argument() -> None:
        return None


async def async_client(mcpd: mcpd_grpc.AsyncClient, req: SamplingRequest) -> None:
    @mcpd.on_sampling
    async def sample(req: SamplingRequest) -> SamplingResult:
        return SamplingResult(req.text)

    assert_type(await sample(req), SamplingResult)

    @mcpd.on_sampling()
    def sample_sync(req: SamplingRequest) -> str:
        return req.text

    assert_type(sample_sync(req), str)

    @mcpd.on_elicitation
    async def elicit(req: ElicitationRequest) -> Optional[Dict[str, Any]]:
        return None

    @mcpd.on_roots
    async def roots(req: RootsRequest) -> List[mcpd_grpc.Root]:
        return [mcpd_grpc.Root("file:///srv")]

    @mcpd.on_authorization
    async def consent(req: AuthorizationRequest) -> Optional[str]:
        return None

    @mcpd.on_approval
    def approve(req: ApprovalRequest) -> bool:
        return False

    @mcpd.on_sampling  # type: ignore[type-var]
    async def sample_wrong_request(req: RootsRequest) -> str:
        return ""

    @mcpd.on_approval  # type: ignore[type-var]
    async def approve_wrong_result(req: ApprovalRequest) -> Optional[str]:
        return None
