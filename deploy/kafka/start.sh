#!/usr/bin/env bash
# Run a single-node Apache Kafka (KRaft, broker+controller in one JVM) on 127.0.0.1 in the foreground.
#
#   deploy/kafka/start.sh DATA_DIR PORT [CONTROLLER_PORT]
#
# Formats DATA_DIR on first use (random cluster id), then `exec`s java so the caller owns the broker
# process: stop it with SIGTERM to its pid. Broker logs go to DATA_DIR/kafka.log, not the terminal.
# Needs the jars from deploy/kafka/fetch.sh (in $PAIRJUDGE_KAFKA_HOME/libs). pairjudge_dev/kafka.py
# start_kafka() does the same from Python.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 DATA_DIR PORT [CONTROLLER_PORT]" >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data_dir="$(mkdir -p "$1" && cd "$1" && pwd)"
port="$2"
kafka_version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")"
kafka_home="${PAIRJUDGE_KAFKA_HOME:-$HOME/.cache/pairjudge/kafka-$kafka_version}"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
controller_port="${3:-$(free_port)}"

if ! compgen -G "$kafka_home/libs/kafka_2.13-*.jar" >/dev/null; then
    echo "Kafka jars not found in $kafka_home/libs; run deploy/kafka/fetch.sh first." >&2
    exit 1
fi

if [[ -n "${JAVA_HOME:-}" ]]; then
    java="$JAVA_HOME/bin/java"
elif command -v java >/dev/null; then
    java="$(command -v java)"
else
    java=/usr/lib/jvm/java-17-openjdk-amd64/bin/java
fi
[[ -x "$java" ]] || { echo "java not found (set JAVA_HOME or install openjdk-17-jre-headless)" >&2; exit 1; }

# The ports change from run to run, so the config is rendered every time; the formatted metadata in
# DATA_DIR/kraft is reused (--ignore-formatted) and does not record listener ports.
escaped_dir="$(printf '%s' "$data_dir" | sed 's/[&|\\]/\\&/g')"
sed -e "s|@PORT@|$port|g" -e "s|@CONTROLLER_PORT@|$controller_port|g" -e "s|@DATA_DIR@|$escaped_dir|g" \
    "$here/server.properties" >"$data_dir/server.properties"

# Log4j 2 (the slf4j binding in libs/): warnings plus the start/stop lines, to a file, not the terminal.
cat >"$data_dir/log4j2.properties" <<LOG4J
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $data_dir/kafka.log
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = info
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = info
logger.controller.name = kafka.server.ControllerServer
logger.controller.level = info
LOG4J

java_opts=(
    -Xms256m -Xmx512m
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$data_dir/log4j2.properties"
    -cp "$kafka_home/libs/*"
)

if [[ ! -f "$data_dir/kraft/meta.properties" ]]; then
    # A Kafka Uuid is 16 random bytes in URL-safe base64 without padding (what `random-uuid` prints).
    # Never one that starts with "-": the storage tool would read it as an option (1 start in 64).
    cluster_id="-"
    while [[ "$cluster_id" == -* ]]; do
        cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    done
    "$java" "${java_opts[@]}" kafka.tools.StorageTool format --ignore-formatted \
        --cluster-id "$cluster_id" --config "$data_dir/server.properties" >>"$data_dir/kafka.log" 2>&1 \
        || { echo "formatting $data_dir/kraft failed; see $data_dir/kafka.log" >&2; tail -n 20 "$data_dir/kafka.log" >&2; exit 1; }
fi

exec "$java" "${java_opts[@]}" kafka.Kafka "$data_dir/server.properties"
