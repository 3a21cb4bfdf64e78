# Sourced by scripts/wasm_deps.sh and scripts/wheel_deps.sh:
#   private_apt "deb-src" bookworm   (or "deb" trixie)
# makes a scratch folder $work (removed at exit) with a package list of its
# own for that suite, on the mirror the system already uses, and sets APT to
# an apt-get that reads only it: the system's apt configuration is left as
# it is. Then "${APT[@]}" update, and source/download inside "$work".
private_apt() {
  local type=$1 suite=$2 uri
  uri=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}' || true)
  [ -n "$uri" ] || uri=$(grep -hoE '^deb +[^ ]+' /etc/apt/sources.list 2>/dev/null | head -1 | awk '{print $2}' || true)
  [ -n "$uri" ] || { echo "$(basename "$0"): no Debian mirror found in /etc/apt" >&2; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial"
  echo "$type $uri $suite main" >"$work/sources.list"
  APT=(apt-get -qq -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
  "${APT[@]}" update
}
