#!/usr/bin/env bash
# Put the Apache Kafka broker's runtime jars in ${PAIRJUDGE_KAFKA_HOME:-~/.cache/pairjudge/kafka-<version>}/libs.
#
# Idempotent: a stamp records the hash of pom.xml, so a second run does nothing and editing the pom
# re-fetches. Maven resolves the jars (see pom.xml); its local repository (~/.m2) caches downloads.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kafka_version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")"
kafka_home="${PAIRJUDGE_KAFKA_HOME:-$HOME/.cache/pairjudge/kafka-$kafka_version}"
libs="$kafka_home/libs"
stamp="$libs/.pom.sha256"
want="$(sha256sum "$here/pom.xml" | cut -d' ' -f1)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && compgen -G "$libs/kafka_2.13-$kafka_version.jar" >/dev/null; then
    echo "Kafka $kafka_version jars already in $libs"
    exit 0
fi

command -v mvn >/dev/null || { echo "mvn not found; install maven (apt-get install maven)" >&2; exit 1; }

mkdir -p "$kafka_home"
# Copy into a scratch folder and swap it in, so an interrupted run never leaves a half-filled libs/.
tmp="$(mktemp -d "$kafka_home/.libs.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp"
compgen -G "$tmp/kafka_2.13-$kafka_version.jar" >/dev/null || { echo "maven did not produce kafka_2.13-$kafka_version.jar" >&2; exit 1; }
echo "$want" >"$tmp/.pom.sha256"
rm -rf "$libs"
mv "$tmp" "$libs"
trap - EXIT
echo "Kafka $kafka_version jars copied to $libs ($(find "$libs" -name '*.jar' | wc -l) jars)"
