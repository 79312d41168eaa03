#!/bin/sh
# The MCP conformance suite's client scenarios with the gateway as the client under test (`make conformance`).
# Needs tests/conformance/node installed (`npm ci` there); PYTHON is the Python that has mcp_manifold.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python}
PATH="$here/node/node_modules/.bin:$PATH"  # Node 22 from npm first: the suite needs it
export PATH
out=${CONFORMANCE_RESULTS:-$here/results}
client="$PYTHON $here/client.py"
status=0
for scenario in initialize tools_call sse-retry; do
	conformance client --command "$client" --scenario "$scenario" -o "$out" || status=1
done
conformance client --command "$client" --suite auth -o "$out" --expected-failures "$here/expected-failures.yml" || status=1
exit $status
