#!/usr/bin/env bash
# ensure-firestore.sh: check that the Firestore emulator and Java are
# installed, as the tests of firestore/ and datastore/ need them (each test
# binary starts its own emulator on a free port: internal/firestoretest).
# It installs nothing: the emulator comes from Google Cloud's apt
# repository, not Debian's, and adding a repository is the machine
# owner's decision. When something is missing it fails and prints the
# steps.
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=("java (Debian: openjdk-17-jre-headless)")
if ! command -v gcloud >/dev/null 2>&1; then
  missing+=("gcloud (google-cloud-cli)")
else
  root=$(dirname "$(dirname "$(readlink -f "$(command -v gcloud)")")")
  [ -f "$root/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar" ] ||
    missing+=("the Firestore emulator (google-cloud-cli-firestore-emulator)")
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

printf 'missing: %s\n' "${missing[@]}" >&2
cat >&2 <<'STEPS'

Install them from Google Cloud's apt repository (as root):

  apt-get -o DPkg::Lock::Timeout=600 update && apt-get -o DPkg::Lock::Timeout=600 install -y apt-transport-https ca-certificates gnupg curl openjdk-17-jre-headless
  curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | gpg --dearmor -o /usr/share/keyrings/cloud.google.gpg
  echo "deb [signed-by=/usr/share/keyrings/cloud.google.gpg] https://packages.cloud.google.com/apt cloud-sdk main" > /etc/apt/sources.list.d/google-cloud-sdk.list
  apt-get -o DPkg::Lock::Timeout=600 update && apt-get -o DPkg::Lock::Timeout=600 install -y google-cloud-cli google-cloud-cli-firestore-emulator

Then check with: gcloud emulators firestore start --host-port=127.0.0.1:8081
STEPS
exit 1
