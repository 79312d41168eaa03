#!/usr/bin/env node
// conformance_everything: what the MCP conformance suite's server scenarios (npm
// @modelcontextprotocol/conformance 0.1.16, `conformance server --url URL`) expect of a server, written
// with the published TypeScript SDK (1.32.2, from tests/node/node_modules), so it shows that SDK's interop
// as it is: a session-era server (2025-11-25 and before; no `server/discover`), stateful over streamable
// HTTP, that asks its client mid-call and, when the client did not declare it can be asked, gets the SDK's
// "Client does not support sampling (required for sampling/createMessage)" and answers it as text.
//
// It plays the part of the suite's reference server (examples/servers/typescript/everything-server.ts in
// the conformance repository, not in the npm package): the same tools, resources, prompts and behaviours
// the scenarios check.
//
//   node tests/servers/conformance_everything.mjs --port PORT      (http://127.0.0.1:PORT/mcp)
//
// Prints "listening on PORT" on stdout once it accepts connections.

import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";

// The SDK and its zod come from tests/node (CommonJS builds, one copy of zod for both).
const require = createRequire(new URL("../node/package.json", import.meta.url));
const { McpServer, ResourceTemplate } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StreamableHTTPServerTransport } = require("@modelcontextprotocol/sdk/server/streamableHttp.js");
const { createMcpExpressApp } = require("@modelcontextprotocol/sdk/server/express.js");
const { ListToolsRequestSchema, isInitializeRequest } = require("@modelcontextprotocol/sdk/types.js");
const { z } = require("zod");

// A 1x1 PNG and a WAV header with two bytes of silence: the smallest media the checks accept.
const PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const SILENT_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
// The schema the json-schema-2020-12 scenario expects back unchanged ($schema, $defs, additionalProperties).
const SCHEMA_2020_12 = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  $defs: { address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } } },
  properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
  additionalProperties: false,
};

const port = Number(process.argv[process.argv.indexOf("--port") + 1] || process.env.PORT || 3000);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (value) => ({ content: [{ type: "text", text: value }] });

// Events kept for resumption (SEP-1699): a client that lost a stream asks again with Last-Event-ID.
class MemoryEventStore {
  events = [];
  async storeEvent(streamId, message) {
    const eventId = `${streamId}_${String(this.events.length).padStart(8, "0")}`;
    this.events.push({ eventId, streamId, message });
    return eventId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const last = this.events.findIndex((event) => event.eventId === lastEventId);
    if (last < 0) return "";
    const { streamId } = this.events[last];
    for (const event of this.events.slice(last + 1)) {
      if (event.streamId === streamId && Object.keys(event.message).length > 0) await send(event.eventId, event.message);
    }
    return streamId;
  }
}

const sessions = new Map(); // session id -> its transport

// The answer of a tool that asked its client: what came back, or why it could not ask (the client did not
// declare the capability, so the SDK refused to send the request), as text, as the reference server does.
async function asking(ask, describe, failure) {
  try {
    return text(describe(await ask()));
  } catch (error) {
    return text(`${failure} not supported or error: ${error.message}`);
  }
}

function elicitation(server, message, properties, required = []) {
  return server.server.elicitInput({ mode: "form", message, requestedSchema: { type: "object", properties, required } });
}

function elicited(result) {
  return `action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
}

function buildServer() {
  const server = new McpServer(
    { name: "conformance-everything-fixture", version: "1.0.0" },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  const log = (data) =>
    server.server.sendLoggingMessage({ level: "info", logger: "conformance-everything", data }).catch(() => {});

  // --- tools ---
  server.registerTool("test_simple_text", { description: "Answers one text block" }, async () =>
    text("This is a simple text response for testing."),
  );
  server.registerTool("test_image_content", { description: "Answers an image (PNG)" }, async () => ({
    content: [{ type: "image", data: PIXEL_PNG, mimeType: "image/png" }],
  }));
  server.registerTool("test_audio_content", { description: "Answers audio (WAV)" }, async () => ({
    content: [{ type: "audio", data: SILENT_WAV, mimeType: "audio/wav" }],
  }));
  server.registerTool("test_embedded_resource", { description: "Answers an embedded text resource" }, async () => ({
    content: [
      {
        type: "resource",
        resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." },
      },
    ],
  }));
  server.registerTool("test_multiple_content_types", { description: "Answers text, an image and a resource" }, async () => ({
    content: [
      { type: "text", text: "Multiple content types test:" },
      { type: "image", data: PIXEL_PNG, mimeType: "image/png" },
      {
        type: "resource",
        resource: {
          uri: "test://mixed-content-resource",
          mimeType: "application/json",
          text: JSON.stringify({ test: "data", value: 123 }),
        },
      },
    ],
  }));
  server.registerTool(
    "test_tool_with_logging",
    { description: "Logs three messages while it works", inputSchema: {} },
    async (_args, extra) => {
      for (const [index, message] of ["Tool execution started", "Tool processing data", "Tool execution completed"].entries()) {
        if (index > 0) await sleep(50);
        await extra.sendNotification({ method: "notifications/message", params: { level: "info", data: message } });
      }
      return text("Tool with logging executed successfully");
    },
  );
  server.registerTool(
    "test_tool_with_progress",
    { description: "Reports progress 0, 50 and 100 of 100", inputSchema: {} },
    async (_args, extra) => {
      const progressToken = extra._meta?.progressToken ?? 0;
      for (const progress of [0, 50, 100]) {
        if (progress > 0) await sleep(50);
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken, progress, total: 100, message: `step ${progress} of 100` },
        });
      }
      return text(String(progressToken));
    },
  );
  server.registerTool("test_error_handling", { description: "Always fails" }, async () => {
    throw new Error("This tool intentionally returns an error for testing");
  });
  server.registerTool(
    "test_reconnection",
    { description: "Closes its SSE stream mid-call; the result comes after the client reconnects", inputSchema: {} },
    async (_args, extra) => {
      sessions.get(extra.sessionId)?.closeSSEStream(extra.requestId);
      await sleep(100);
      return text("Reconnection test completed successfully.");
    },
  );
  server.registerTool(
    "test_sampling",
    { description: "Asks the client's model", inputSchema: { prompt: z.string().describe("The prompt to send") } },
    async ({ prompt }) =>
      asking(
        () =>
          server.server.createMessage({ messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100 }),
        (result) => `LLM response: ${result.content?.text ?? "No response"}`,
        "Sampling",
      ),
  );
  server.registerTool(
    "test_elicitation",
    { description: "Asks the client's user", inputSchema: { message: z.string().describe("The message to show") } },
    async ({ message }) =>
      asking(
        () => elicitation(server, message, { response: { type: "string", description: "User's response" } }, ["response"]),
        (result) => `User response: ${elicited(result)}`,
        "Elicitation",
      ),
  );
  server.registerTool(
    "test_elicitation_sep1034_defaults",
    { description: "Asks with a default for every primitive type (SEP-1034)", inputSchema: {} },
    async () =>
      asking(
        () =>
          elicitation(server, "Please review the defaults", {
            name: { type: "string", description: "User name", default: "John Doe" },
            age: { type: "integer", description: "User age", default: 30 },
            score: { type: "number", description: "User score", default: 95.5 },
            status: { type: "string", description: "User status", enum: ["active", "inactive", "pending"], default: "active" },
            verified: { type: "boolean", description: "Verified", default: true },
          }),
        (result) => `Elicitation completed: ${elicited(result)}`,
        "Elicitation",
      ),
  );
  const choices = (values, titles) => values.map((value, index) => ({ const: value, title: titles[index] }));
  server.registerTool(
    "test_elicitation_sep1330_enums",
    { description: "Asks with each kind of enum (SEP-1330)", inputSchema: {} },
    async () =>
      asking(
        () =>
          elicitation(server, "Please pick", {
            untitledSingle: { type: "string", enum: ["option1", "option2", "option3"] },
            titledSingle: { type: "string", oneOf: choices(["value1", "value2", "value3"], ["First", "Second", "Third"]) },
            legacyEnum: { type: "string", enum: ["opt1", "opt2", "opt3"], enumNames: ["Option One", "Option Two", "Option Three"] },
            untitledMulti: { type: "array", minItems: 1, maxItems: 3, items: { type: "string", enum: ["option1", "option2", "option3"] } },
            titledMulti: {
              type: "array",
              minItems: 1,
              maxItems: 3,
              items: { anyOf: choices(["value1", "value2", "value3"], ["First", "Second", "Third"]) },
            },
          }),
        (result) => `Elicitation completed: ${elicited(result)}`,
        "Elicitation",
      ),
  );
  server.registerTool(
    "json_schema_2020_12_tool",
    {
      description: "Listed with a JSON Schema 2020-12 input schema",
      inputSchema: { name: z.string().optional(), address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional() },
    },
    async (args) => text(`called with ${JSON.stringify(args)}`),
  );

  // The SDK lists schemas it converted from zod (no $schema, $defs or additionalProperties): list the
  // 2020-12 tool with its own schema, the others as the SDK's own handler (kept in the private
  // `_requestHandlers` of SDK 1.32.2; there is no public way to reach it) lists them.
  const listTools = server.server._requestHandlers.get("tools/list");
  server.server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
    const listed = await listTools(request, extra);
    return {
      ...listed,
      tools: listed.tools.map((tool) => (tool.name === "json_schema_2020_12_tool" ? { ...tool, inputSchema: SCHEMA_2020_12 } : tool)),
    };
  });

  // --- resources ---
  const resource = (name, uri, mimeType, contents) =>
    server.registerResource(name, uri, { title: name, description: `The ${name} resource`, mimeType }, async () => ({
      contents: [{ uri, mimeType, ...contents }],
    }));
  resource("static-text", "test://static-text", "text/plain", { text: "This is the content of the static text resource." });
  resource("static-binary", "test://static-binary", "image/png", { blob: PIXEL_PNG });
  resource("watched-resource", "test://watched-resource", "text/plain", { text: "Watched resource content" });
  server.registerResource(
    "template",
    new ResourceTemplate("test://template/{id}/data", { list: undefined }),
    { title: "template", description: "Data for an id", mimeType: "application/json" },
    async (uri, { id }) => ({
      contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }],
    }),
  );
  const subscribed = new Set();
  server.server.setRequestHandler(z.object({ method: z.literal("resources/subscribe") }).passthrough(), async (request) => {
    subscribed.add(request.params.uri);
    log(`subscribed to ${request.params.uri}`);
    return {};
  });
  server.server.setRequestHandler(z.object({ method: z.literal("resources/unsubscribe") }).passthrough(), async (request) => {
    subscribed.delete(request.params.uri);
    log(`unsubscribed from ${request.params.uri}`);
    return {};
  });

  // --- prompts ---
  server.registerPrompt("test_simple_prompt", { description: "A prompt without arguments" }, async () => ({
    messages: [{ role: "user", content: { type: "text", text: "This is a simple prompt for testing." } }],
  }));
  server.registerPrompt(
    "test_prompt_with_arguments",
    { description: "A prompt with two arguments", argsSchema: { arg1: z.string(), arg2: z.string() } },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: "user", content: { type: "text", text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }],
    }),
  );
  server.registerPrompt(
    "test_prompt_with_embedded_resource",
    { description: "A prompt that embeds a resource", argsSchema: { resourceUri: z.string() } },
    async ({ resourceUri }) => ({
      messages: [
        { role: "user", content: { type: "resource", resource: { uri: resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." } } },
        { role: "user", content: { type: "text", text: "Please process the embedded resource above." } },
      ],
    }),
  );
  server.registerPrompt("test_prompt_with_image", { description: "A prompt with an image" }, async () => ({
    messages: [
      { role: "user", content: { type: "image", data: PIXEL_PNG, mimeType: "image/png" } },
      { role: "user", content: { type: "text", text: "Please analyze the image above." } },
    ],
  }));

  // --- logging and completions ---
  server.server.setRequestHandler(z.object({ method: z.literal("logging/setLevel") }).passthrough(), async (request) => {
    log(`log level set to ${request.params.level}`);
    return {};
  });
  server.server.setRequestHandler(z.object({ method: z.literal("completion/complete") }).passthrough(), async () => ({
    completion: { values: [], total: 0, hasMore: false },
  }));
  return server;
}

// --- streamable HTTP, one session per initialize; Host and Origin checked (DNS rebinding) ---
const app = createMcpExpressApp({ host: "127.0.0.1" });

app.post("/mcp", async (req, res) => {
  const id = req.headers["mcp-session-id"];
  let transport = id ? sessions.get(id) : undefined;
  if (!transport) {
    if (id || !isInitializeRequest(req.body)) {
      res.status(id ? 404 : 400).json({ jsonrpc: "2.0", error: { code: -32000, message: "Invalid or missing session ID" }, id: null });
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      eventStore: new MemoryEventStore(),
      retryInterval: 5000,
      onsessioninitialized: (sessionId) => sessions.set(sessionId, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await buildServer().connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});

const inSession = async (req, res) => {
  const transport = sessions.get(req.headers["mcp-session-id"]);
  if (!transport) {
    res.status(400).send("Invalid or missing session ID");
    return;
  }
  await transport.handleRequest(req, res);
};
app.get("/mcp", inSession);
app.delete("/mcp", inSession);

const listener = app.listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
