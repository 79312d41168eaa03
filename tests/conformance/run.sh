#!/bin/sh
# The MCP conformance suite (`make conformance`): its client scenarios with the gateway as the client under
# test, then its server scenarios against tests/servers/conformance_everything.mjs directly and through the
# gateway (server_scenarios.py). Needs tests/conformance/node and tests/node installed (`npm ci` in each);
# PYTHON is the Python that has mcp_manifold. `run.sh client` or `run.sh server` runs one part only.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python}
PATH="$here/node/node_modules/.bin:$PATH"  # Node 22 from npm first: the suite needs it
export PATH
out=${CONFORMANCE_RESULTS:-$here/results}
client="$PYTHON $here/client.py"
part=${1:-all}
status=0
if [ "$part" != server ]; then
	for scenario in initialize tools_call sse-retry; do
		conformance client --command "$client" --scenario "$scenario" -o "$out" || status=1
	done
	conformance client --command "$client" --suite auth -o "$out" --expected-failures "$here/expected-failures.yml" || status=1
fi
if [ "$part" != client ]; then
	"$PYTHON" "$here/server_scenarios.py" --keep "$out/servers" || status=1
fi
exit $status
