"""asks: tools, a prompt and a resource that need input from the client, in both protocol eras.

Each of them asks the client for something (form elicitation, URL elicitation, sampling, roots) before it
can answer. How it asks follows the request's protocol era:

- handshake era (``initialize``, 2025-11-25 and before): it sends the ``elicitation/create``,
  ``sampling/createMessage`` or ``roots/list`` request to the client in the middle of the call and waits;
- 2026-07-28: it answers ``resultType: "input_required"`` with ``inputRequests`` (keys below) and a
  ``requestState``; the client retries the same request with ``inputResponses`` and that state, and gets
  the result (or the next question). The state is sealed by the SDK's ``RequestStateBoundary`` (AES-GCM,
  bound to method, target and arguments): an edited or foreign state is refused with -32602.

The answer is the same text in both eras. A request whose client did not declare the capability a question
needs is refused with -32021 (missing required client capability).

Tools: ``ask_name`` (form, key ``name``: "hello <name>", or "declined" / "cancelled"), ``ask_model``
(sampling, key ``model``: "model said: <text>"), ``ask_roots`` (roots, key ``roots``: the root URIs, one
per line), ``ask_url`` (URL-mode elicitation, key ``consent``; after an accepted one the handshake era also
gets ``notifications/elicitation/complete``: "url <action>"), ``interview`` (two rounds: the name, then
sampling with a prompt that contains it, so the second round only works if the state carried the first
answer: "interview: <name>; model said: <text>"), ``survey`` (one round with two requests, ``name`` and
``roots``: "survey: <name>; roots: <uris>"). Prompt ``greeting`` and resource ``asks://name`` ask for
the name too.

``--era legacy|modern|both`` (default both) serves only one era, for the four client/server pairings.

Run: ``python tests/servers/asks.py [--era E]`` (stdio) or add ``--http PORT``.
"""

import json
from collections.abc import Callable, Mapping
from typing import Any

import _common  # noqa: F401 - must come before the SDK (see _common._preload_stdlib_numbers)
import mcp_types as types
from _common import add_era_argument, make_parser, serve
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

Answers = dict[str, BaseModel]
Step = dict[str, types.InputRequest] | str
"""What a flow wants next: the questions to ask (by key), or the final text."""
Flow = Callable[[Mapping[str, Any], Answers], Step]

CONSENT_URL = "https://example.com/asks/consent"
NAME_SCHEMA: types.ElicitRequestedSchema = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Your name"}},
    "required": ["name"],
}
RESULT_TYPES: dict[str, type[BaseModel]] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}
METHOD_OF = {result_type: method for method, result_type in RESULT_TYPES.items()}


# --- the questions ------------------------------------------------------------------------------------------


def ask_for_name(message: str = "What is your name?") -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=NAME_SCHEMA))


def ask_model(prompt: str) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=[message], max_tokens=100))


def ask_consent() -> types.ElicitRequest:
    params = types.ElicitRequestURLParams(
        message="Open this page to give your consent.", url=CONSENT_URL, elicitation_id="asks-consent"
    )
    return types.ElicitRequest(params=params)


def name_of(answer: BaseModel) -> str | None:
    """The name from an accepted elicitation, or None when the user declined or cancelled."""
    assert isinstance(answer, types.ElicitResult)
    if answer.action != "accept":
        return None
    return str((answer.content or {}).get("name", ""))


def text_of(answer: BaseModel) -> str:
    assert isinstance(answer, types.CreateMessageResult)
    content = answer.content
    return content.text if isinstance(content, types.TextContent) else f"<{content.type}>"


def uris_of(answer: BaseModel) -> str:
    assert isinstance(answer, types.ListRootsResult)
    return "\n".join(str(root.uri) for root in answer.roots)


def refused(answer: BaseModel) -> str:
    assert isinstance(answer, types.ElicitResult)
    return "declined" if answer.action == "decline" else "cancelled"


# --- the flows: given the arguments and the answers so far, the next questions or the final text ------------


def flow_ask_name(arguments: Mapping[str, Any], answers: Answers) -> Step:
    if "name" not in answers:
        return {"name": ask_for_name()}
    name = name_of(answers["name"])
    return f"hello {name}" if name is not None else refused(answers["name"])


def flow_ask_model(arguments: Mapping[str, Any], answers: Answers) -> Step:
    if "model" not in answers:
        return {"model": ask_model(str(arguments.get("prompt", "Say something.")))}
    return f"model said: {text_of(answers['model'])}"


def flow_ask_roots(arguments: Mapping[str, Any], answers: Answers) -> Step:
    if "roots" not in answers:
        return {"roots": types.ListRootsRequest()}
    return uris_of(answers["roots"])


def flow_ask_url(arguments: Mapping[str, Any], answers: Answers) -> Step:
    if "consent" not in answers:
        return {"consent": ask_consent()}
    answer = answers["consent"]
    assert isinstance(answer, types.ElicitResult)
    return f"url {answer.action}"


def flow_interview(arguments: Mapping[str, Any], answers: Answers) -> Step:
    if "name" not in answers:
        return {"name": ask_for_name()}
    name = name_of(answers["name"])
    if name is None:
        return f"interview {refused(answers['name'])}"
    if "model" not in answers:
        # Round two depends on round one's answer: on 2026-07-28 only the request state carries it here.
        return {"model": ask_model(f"Write a one-line greeting for {name}.")}
    return f"interview: {name}; model said: {text_of(answers['model'])}"


def flow_survey(arguments: Mapping[str, Any], answers: Answers) -> Step:
    pending: dict[str, types.InputRequest] = {}
    if "name" not in answers:
        pending["name"] = ask_for_name()
    if "roots" not in answers:
        pending["roots"] = types.ListRootsRequest()
    if pending:
        return pending
    name = name_of(answers["name"])
    return f"survey: {name if name is not None else refused(answers['name'])}; roots: {uris_of(answers['roots'])}"


def flow_greeting(arguments: Mapping[str, Any], answers: Answers) -> Step:
    if "name" not in answers:
        return {"name": ask_for_name("Who should be greeted?")}
    name = name_of(answers["name"])
    return f"Write a warm greeting for {name}." if name is not None else f"Greeting {refused(answers['name'])}."


def flow_resource(arguments: Mapping[str, Any], answers: Answers) -> Step:
    if "name" not in answers:
        return {"name": ask_for_name("Whose name should this resource hold?")}
    return name_of(answers["name"]) or refused(answers["name"])


TOOLS: dict[str, tuple[Flow, str, dict[str, Any]]] = {
    "ask_name": (flow_ask_name, "Ask the user's name (form elicitation) and greet them.", {}),
    "ask_model": (
        flow_ask_model,
        "Ask the client's model (sampling) to answer `prompt`.",
        {"prompt": {"type": "string", "description": "What to ask the model"}},
    ),
    "ask_roots": (flow_ask_roots, "Ask the client for its roots and list their URIs.", {}),
    "ask_url": (flow_ask_url, "Send the user to a consent page (URL-mode elicitation).", {}),
    "interview": (flow_interview, "Two rounds: ask the user's name, then ask the model to greet them.", {}),
    "survey": (flow_survey, "One round with two questions: the user's name and the client's roots.", {}),
}


# --- asking: mid-call requests (handshake era) or input_required rounds (2026-07-28) -------------------------


def is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def require_capability(ctx: ServerRequestContext[Any, Any], request: types.InputRequest) -> None:
    """Refuse with -32021 when the client did not declare what `request` needs (checked before asking)."""
    have = ctx.session.client_capabilities or types.ClientCapabilities()
    if isinstance(request, types.ElicitRequest):
        elicitation = have.elicitation
        if isinstance(request.params, types.ElicitRequestURLParams):
            ok, name, need = elicitation is not None and elicitation.url is not None, "url elicitation", {"url": {}}
        else:
            # A bare `elicitation: {}` (before modes existed) means form.
            ok = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
            name, need = "form elicitation", {"form": {}}
        required: dict[str, Any] = {"elicitation": need}
    elif isinstance(request, types.CreateMessageRequest):
        ok, name, required = have.sampling is not None, "sampling", {"sampling": {}}
    else:
        ok, name, required = have.roots is not None, "roots", {"roots": {}}
    if not ok:
        raise MCPError(
            code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"the client did not declare the {name} capability this request needs",
            data={"requiredCapabilities": required},
        )


async def ask_now(ctx: ServerRequestContext[Any, Any], request: types.InputRequest) -> BaseModel:
    """Handshake era: send `request` to the client on this call's stream and wait for its answer."""
    result_type = RESULT_TYPES[request.method]
    metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
    answer = await ctx.session.send_request(request, result_type, metadata=metadata)  # type: ignore[arg-type]
    url_params = request.params if isinstance(request.params, types.ElicitRequestURLParams) else None
    accepted = isinstance(answer, types.ElicitResult) and answer.action == "accept"
    if url_params is not None and url_params.elicitation_id is not None and accepted:
        # The user went through the page: tell the client the out-of-band step is done.
        await ctx.session.send_elicit_complete(url_params.elicitation_id, related_request_id=ctx.request_id)
    return answer


def restore(target: str, state: str | None) -> Answers:
    """The answers earlier rounds left in the request state (unsealed by the boundary before the handler)."""
    if state is None:
        return {}
    try:
        data = json.loads(state)
        if data["target"] != target:
            raise ValueError(f"state of {data['target']!r}")
        answers = {
            key: RESULT_TYPES[entry["method"]].model_validate(entry["result"]) for key, entry in data["answers"].items()
        }
        return answers
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=f"requestState does not belong to {target!r}") from exc


def accept(key: str, request: types.InputRequest, response: BaseModel) -> BaseModel:
    """Read a client's input response as the result type its question calls for."""
    wire = response.model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        return RESULT_TYPES[request.method].model_validate(wire)
    except ValidationError:
        raise MCPError(
            code=types.INVALID_PARAMS, message=f"inputResponses[{key!r}] does not answer a {request.method} request"
        ) from None


async def drive(
    ctx: ServerRequestContext[Any, Any],
    target: str,
    flow: Flow,
    arguments: Mapping[str, Any],
    params: types.InputResponseRequestParams,
) -> str | types.InputRequiredResult:
    """Run `flow` to its final text, asking the client in the way the request's era allows."""
    if not is_modern(ctx):
        answers: Answers = {}
        while not isinstance(step := flow(arguments, answers), str):
            for key, request in step.items():
                require_capability(ctx, request)
                answers[key] = await ask_now(ctx, request)
        return step
    answers = restore(target, params.request_state)
    responses = params.input_responses or {}
    while not isinstance(step := flow(arguments, answers), str):
        for key, request in step.items():
            if key in responses:
                answers[key] = accept(key, request, responses[key])
        pending = {key: request for key, request in step.items() if key not in answers}
        if pending:
            for request in pending.values():
                require_capability(ctx, request)
            recorded = {
                key: {"method": METHOD_OF[type(answer)], "result": answer.model_dump(mode="json", by_alias=True)}
                for key, answer in answers.items()
            }
            state = json.dumps({"target": target, "answers": recorded})
            return types.InputRequiredResult(input_requests=pending, request_state=state)
    return step


# --- the MCP handlers ---------------------------------------------------------------------------------------


async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
    tools = [
        types.Tool(name=name, description=description, input_schema={"type": "object", "properties": properties})
        for name, (_, description, properties) in TOOLS.items()
    ]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
    if params.name not in TOOLS:
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}")
    flow = TOOLS[params.name][0]
    outcome = await drive(ctx, params.name, flow, params.arguments or {}, params)
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    return types.CallToolResult(content=[types.TextContent(type="text", text=outcome)])


async def list_prompts(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
    return types.ListPromptsResult(
        prompts=[types.Prompt(name="greeting", description="A greeting; asks for the name.")]
    )


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
    if params.name != "greeting":
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt {params.name!r}")
    outcome = await drive(ctx, params.name, flow_greeting, params.arguments or {}, params)
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=outcome))
    return types.GetPromptResult(messages=[message])


async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
    resource = types.Resource(uri="asks://name", name="name", description="The user's name; asks for it.")
    return types.ListResourcesResult(resources=[resource])


async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
    uri = str(params.uri)
    if uri != "asks://name":
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {uri!r}")
    outcome = await drive(ctx, uri, flow_resource, {}, params)
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=outcome)]
    )


server: Server[Any] = Server(
    "asks",
    version="1.0.0",
    instructions="Tools that need input from the client, in both protocol eras.",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
)
# Seals every outgoing requestState and checks every echoed one, as MCPServer does by default.
server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=server.name))


if __name__ == "__main__":
    parser = make_parser(__doc__.splitlines()[0])
    add_era_argument(parser)
    args = parser.parse_args()
    serve(server, args, era=args.era)
