# Sourced by check_podman.sh and check_kube_play.sh (WORK set): podman 4.3's config for this run, in a file of
# its own (CONTAINERS_CONF; the machine's is left alone), for VMs like the CI's:
# (a) without CAP_SYS_RESOURCE, crun cannot raise the rlimits to podman's defaults ("crun: setrlimit
#     `RLIMIT_NOFILE`: Operation not permitted"), so the host's hard limits (podman caps nproc at 32768 for
#     its children);
# (b) with hybrid cgroups (v1 and a v2 hierarchy holding a controller) crun refuses ("cgroups in hybrid mode
#     not supported"); runc does not.
mkdir -p "$WORK"
hn=$(ulimit -Hn); hu=$(ulimit -Hu)
[ "$hn" = unlimited ] && hn=1048576
{ [ "$hu" = unlimited ] || [ "$hu" -gt 32768 ]; } && hu=32768
cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$hn:$hn", "nproc=$hu:$hu"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF=$WORK/containers.conf
