# Render deploy/k8s for podman 4.3 `kube play`, doing only what the kubelet does and podman does not:
#   - one Pod per replica from the Deployment's template (podman 4.3 also makes N pods from a Deployment,
#     but publishes every containerPort on the host at the same number, so replicas 2..N fail to start);
#   - status.podIP (podman: "fieldPath status.podIP is either not valid or not supported"): the pod's
#     static IP, given to `kube play --ip` in the same order;
#   - $(VAR) references to earlier env entries expanded (podman passes them through literally);
#   - emptyDir volumes renamed per pod (podman 4.3 makes a named volume called after the volume, shared
#     by every pod that uses the same name);
#   - the containerPort published on 127.0.0.1 at a free port per pod (podman 4.3 defaults hostPort to
#     containerPort on 0.0.0.0).
# Everything else (secretKeyRef, configMap volume, PVC, securityContext, resources, probes) is left as
# written. The ConfigMap and PVC documents pass through; kinds podman ignores (Service, PDB, HPA) are dropped.
# Usage: kube_play_render.py K8S_DIR OUT.yaml IP[,IP...] PORT[,PORT...]  -> prints the pod names, one a line.
import copy
import re
import sys
from pathlib import Path

import yaml

k8s, out, ips, ports = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(","), sys.argv[4].split(",")
resources = yaml.safe_load((k8s / "kustomization.yaml").read_text())["resources"]
docs = [d for f in resources for d in yaml.safe_load_all((k8s / f).read_text()) if d]
deployments = [d for d in docs if d["kind"] == "Deployment"]
assert len(deployments) == 1, "expected one Deployment"
deployment = deployments[0]
replicas = deployment["spec"].get("replicas", 1)
assert len(ips) >= replicas and len(ports) >= replicas, f"need {replicas} IPs and ports"

rendered = [d for d in docs if d["kind"] in ("ConfigMap", "PersistentVolumeClaim")]
names = []
for i in range(replicas):
    name = f"{deployment['metadata']['name']}-pod-{i}"
    template = copy.deepcopy(deployment["spec"]["template"])
    spec = template["spec"]
    renames = {}
    for volume in spec.get("volumes", []):
        if "emptyDir" in volume:
            renames[volume["name"]] = f"{name}-{volume['name']}"
            volume["name"] = renames[volume["name"]]
    for container in spec["containers"]:
        for mount in container.get("volumeMounts", []):
            mount["name"] = renames.get(mount["name"], mount["name"])
        for port in container.get("ports", []):
            port["hostIP"], port["hostPort"] = "127.0.0.1", int(ports[i])
        known = {}
        for env in container.get("env", []):
            field = env.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            if field == "status.podIP":
                env.pop("valueFrom")
                env["value"] = ips[i]
            elif field == "metadata.name":
                known[env["name"]] = name  # podman sets this one itself (the pod's name)
            if "value" in env:
                # Kubernetes: $(VAR) of a variable defined earlier in the list; $$ escapes.
                env["value"] = re.sub(
                    r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                    lambda m, known=known: "$" if m.group(0) == "$$" else known.get(m.group(1), m.group(0)),
                    env["value"],
                )
                known[env["name"]] = env["value"]
    rendered.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": template["metadata"].get("labels", {})},
            "spec": spec,
        }
    )
    names.append(name)
out.write_text(yaml.safe_dump_all(rendered, sort_keys=False))
print("\n".join(names))
