#!/usr/bin/env node
// One MCP session driven by the published TypeScript SDK client, for the comparison tests.
//
//   node ts_client.mjs [options] --url http://127.0.0.1:PORT/mcp
//   node ts_client.mjs [options] -- COMMAND [ARGS...]          (stdio)
//
// Options:
//   --ops JSON         operations to run in order (default: [{"op":"list_tools"}]); --ops @FILE reads a file
//   --root URI         declare the roots capability and answer roots/list with these roots (repeatable)
//   --roots-capability declare roots even with no --root (roots/list then answers an empty list)
//   --sampling         declare sampling; sampling/createMessage is answered with a canned text
//   --elicitation      declare elicitation; elicitation/create is answered with "decline"
//   --timeout MS       per-request timeout (default 20000)
//   --raw              also print each operation's raw JSON-RPC results, as they came off the wire
//   --name NAME        clientInfo.name (default "ts-client")
//
// Operations ({"op": ...}): list_tools, list_resources, list_templates, list_prompts (all pages),
// call_tool {name, arguments}, read_resource {uri}, get_prompt {name, arguments},
// complete {ref, argument, context?}, subscribe {uri}, unsubscribe {uri}, set_level {level}, ping,
// set_roots {roots: [uri...]} (answers later roots/list with these and sends roots/list_changed),
// poll {call: {op...}, contains: TEXT, ms?: 5000} (repeats `call` until its answer's JSON contains TEXT,
// then answers with it plus "_attempts"; after `ms` answers with the last one), wait {ms}.
//
// Prints one JSON document on stdout:
//   {"server": {info, capabilities, instructions, protocolVersion}, "results": [{op, result} | {op, error}],
//    "notifications": [{method, params}], "requests": [{method, params, undeclared?}] (requests from the
//    server; undeclared: true when the client had not declared the capability and refused it),
//    "stderr": "..." (stdio),
//    "error": {...} (only when the connection itself failed)}
// Exit code 0 whenever the JSON was printed (failed operations are in "results"); 2 on bad usage.

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";

function usage(message) {
  process.stderr.write(`ts_client: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { roots: [], rootsCapability: false, sampling: false, elicitation: false, timeout: 20000,
    raw: false, name: "ts-client", url: null, command: null, ops: [{ op: "list_tools" }] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === "--") {
      options.command = argv.slice(i + 1);
      break;
    } else if (arg === "--url") options.url = value();
    else if (arg === "--root") { options.roots.push(value()); options.rootsCapability = true; }
    else if (arg === "--roots-capability") options.rootsCapability = true;
    else if (arg === "--sampling") options.sampling = true;
    else if (arg === "--elicitation") options.elicitation = true;
    else if (arg === "--timeout") options.timeout = Number(value());
    else if (arg === "--raw") options.raw = true;
    else if (arg === "--name") options.name = value();
    else if (arg === "--ops") {
      const text = value();
      options.ops = JSON.parse(text.startsWith("@") ? readFileSync(text.slice(1), "utf8") : text);
    } else usage(`unknown option ${arg}`);
  }
  if (!options.url === !options.command) usage("give either --url URL or -- COMMAND [ARGS...]");
  if (options.command && options.command.length === 0) usage("no command after --");
  return options;
}

const options = parseArgs(process.argv.slice(2));
const output = { server: null, results: [], notifications: [], requests: [] };
let roots = options.roots.map((uri) => ({ uri }));

const capabilities = {};
if (options.rootsCapability) capabilities.roots = { listChanged: true };
if (options.sampling) capabilities.sampling = {};
if (options.elicitation) capabilities.elicitation = {};

const client = new Client({ name: options.name, version: "1.0.0" }, { capabilities });
if (options.rootsCapability) {
  client.setRequestHandler(ListRootsRequestSchema, async (request) => {
    output.requests.push({ method: request.method, params: request.params ?? null });
    return { roots };
  });
}
if (options.sampling) {
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    output.requests.push({ method: request.method, params: request.params ?? null });
    return { role: "assistant", content: { type: "text", text: "sampled by ts_client" }, model: "ts-client",
      stopReason: "endTurn" };
  });
}
if (options.elicitation) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    output.requests.push({ method: request.method, params: request.params ?? null });
    return { action: "decline" };
  });
}
// A request the client did not declare a capability for is recorded too (then refused, as the SDK would).
client.fallbackRequestHandler = async (request) => {
  output.requests.push({ method: request.method, params: request.params ?? null, undeclared: true });
  throw new McpError(ErrorCode.MethodNotFound, "Method not found");
};
client.fallbackNotificationHandler = async (notification) => {
  output.notifications.push({ method: notification.method, params: notification.params ?? null });
};
// Handlers the SDK installs itself (progress, cancellation) bypass the fallback: they are not recorded.

let transport;
let stderr = "";
if (options.url) {
  transport = new StreamableHTTPClientTransport(new URL(options.url));
} else {
  const [command, ...args] = options.command;
  transport = new StdioClientTransport({ command, args, env: { ...getDefaultEnvironment(), ...process.env },
    stderr: "pipe" });
  transport.stderr?.on("data", (chunk) => { stderr += chunk.toString(); });
}

// Raw results by request id, to show what came off the wire before the SDK's schemas parsed it.
const rawById = new Map();
const sentIds = [];
const start = transport.start.bind(transport);
transport.start = async () => {
  const inner = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message && message.id !== undefined && (message.result !== undefined || message.error !== undefined)) {
      rawById.set(message.id, message.result ?? { error: message.error });
    }
    inner?.(message, extra);
  };
  return start();
};
const send = transport.send.bind(transport);
transport.send = async (message, sendOptions) => {
  if (message && message.method !== undefined && message.id !== undefined) sentIds.push(message.id);
  return send(message, sendOptions);
};

const requestOptions = { timeout: options.timeout };

async function allPages(method, key) {
  const items = [];
  let cursor;
  do {
    const page = await client[method](cursor === undefined ? {} : { cursor }, requestOptions);
    items.push(...(page[key] ?? []));
    cursor = page.nextCursor;
  } while (cursor);
  return { [key]: items };
}

async function run(op) {
  switch (op.op) {
    case "list_tools": return allPages("listTools", "tools");
    case "list_resources": return allPages("listResources", "resources");
    case "list_templates": return allPages("listResourceTemplates", "resourceTemplates");
    case "list_prompts": return allPages("listPrompts", "prompts");
    case "call_tool": return client.callTool({ name: op.name, arguments: op.arguments ?? {} }, undefined, requestOptions);
    case "read_resource": return client.readResource({ uri: op.uri }, requestOptions);
    case "get_prompt": return client.getPrompt({ name: op.name, arguments: op.arguments ?? {} }, requestOptions);
    case "complete": {
      const params = { ref: op.ref, argument: op.argument };
      if (op.context) params.context = op.context;
      return client.complete(params, requestOptions);
    }
    case "subscribe": return client.subscribeResource({ uri: op.uri }, requestOptions);
    case "unsubscribe": return client.unsubscribeResource({ uri: op.uri }, requestOptions);
    case "set_level": return client.setLoggingLevel(op.level, requestOptions);
    case "ping": return client.ping(requestOptions);
    case "set_roots":
      roots = (op.roots ?? []).map((uri) => ({ uri }));
      await client.sendRootsListChanged();
      return {};
    case "poll": {
      // Repeat one operation until the JSON of its answer contains `contains` (or `ms` pass): for state
      // that settles asynchronously, such as a server's view of roots after roots/list_changed.
      const deadline = Date.now() + (op.ms ?? 5000);
      for (let attempt = 1; ; attempt++) {
        let answer;
        try {
          answer = { result: await run(op.call) };
        } catch (error) {
          answer = { error: describeError(error) };
        }
        if (JSON.stringify(answer).includes(op.contains) || Date.now() >= deadline) {
          if (answer.error) throw Object.assign(new Error(answer.error.message), answer.error);
          return { ...answer.result, _attempts: attempt };
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    case "wait":
      await new Promise((resolve) => setTimeout(resolve, op.ms ?? 0));
      return {};
    default: throw new Error(`unknown operation ${JSON.stringify(op.op)}`);
  }
}

function describeError(error) {
  const described = { message: error instanceof Error ? error.message : String(error) };
  if (error && typeof error === "object" && "code" in error && error.code !== undefined) described.code = error.code;
  if (error && typeof error === "object" && "data" in error && error.data !== undefined) described.data = error.data;
  return described;
}

try {
  await client.connect(transport, requestOptions);
  output.server = {
    info: client.getServerVersion() ?? null,
    capabilities: client.getServerCapabilities() ?? null,
    instructions: client.getInstructions() ?? null,
    protocolVersion: transport.protocolVersion ?? null,
  };
  for (const op of options.ops) {
    const first = sentIds.length;
    const entry = { op: op.op };
    if (op.name !== undefined) entry.name = op.name;
    if (op.uri !== undefined) entry.uri = op.uri;
    try {
      entry.result = await run(op);
    } catch (error) {
      entry.error = describeError(error);
    }
    if (options.raw) entry.raw = sentIds.slice(first).map((id) => rawById.get(id) ?? null);
    output.results.push(entry);
  }
} catch (error) {
  output.error = describeError(error);
} finally {
  try {
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) await transport.terminateSession();
  } catch {
    // A gateway that refuses DELETE still gets its connection closed below.
  }
  try {
    await client.close();
  } catch {
    // Closing a transport whose peer already left is not the operation's failure.
  }
}
if (options.command) output.stderr = stderr;
process.stdout.write(JSON.stringify(output) + "\n");
process.exit(0);
