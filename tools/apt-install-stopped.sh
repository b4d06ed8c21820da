#!/bin/sh
# apt-get install [OPTION...] PACKAGE... without starting their services. Debian's maintainer scripts start a
# package's service when it is installed (prometheus, munged, slurmd, slurmctld), through invoke-rc.d or
# deb-systemd-invoke, on a host with an init; the tests only need the programs, and start what they run
# themselves. Both ask /usr/sbin/policy-rc.d first, and its exit status 101 means "action forbidden": one is
# put there while apt-get runs and removed after, whatever apt-get did or however it ended. One that was
# already there is the host's and is left alone.
#
#   tools/apt-install-stopped.sh --no-install-recommends prometheus    (as root: make fleet-deps, tool-deps)
set -u
policy="${POLICY_RC_D:-/usr/sbin/policy-rc.d}"  # the variable is for the test, which cannot write /usr/sbin
ours=""
cleanup() {
  if [ -n "$ours" ]; then rm -f "$policy"; fi
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 129' HUP
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# tools/apt-install-stopped.sh: no service starts while apt-get installs\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  ours=1
fi
apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
status=$?
cleanup
exit "$status"
