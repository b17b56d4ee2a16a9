package kafkagroup.metrics;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

/**
 * Reads one {@code kafka-group} source's entry of a streaming query progress.
 *
 * <p>Spark describes every Python streaming source the same way
 * ({@code org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream...@hash}),
 * so a {@code kafka-group} source is recognised by the shape of its reported latest offsets:
 * a JSON object with an {@code "@member"} object naming the consumer group.
 *
 * <p>Lag of a partition is {@code latestOffset[topic][partition] - position}, where the position
 * comes from {@code endOffset[topic][partition]}: either the position itself (a number) or the
 * batch's planned range {@code [from, until)}, whose {@code until} is the position after the batch.
 * Partitions with a latest offset but no position yet (assigned, not planned) get no lag.
 */
public final class ProgressParser {

    /** What a progress event says about one {@code kafka-group} source. */
    public static final class SourceSnapshot {
        /** Lag per topic, then per partition. */
        public final Map<String, Map<Integer, Long>> lag = new TreeMap<>();
        /** Partitions this member owns ({@code @member.owned}). */
        public long owned;
        /** Partitions paused by flow control ({@code @flow.paused}); 0 when not reported. */
        public long paused;
        /** Partitions held back by flow control ({@code @flow.held}); 0 when not reported. */
        public long held;
        /** The group generation of this member, or -1 when not reported. */
        public long generation = -1;
        /** The consumer group id, or null when not reported. */
        public String group;
        /** Records the batch read. */
        public long numInputRows;
        /** Spark's input rate for this source. */
        public double inputRowsPerSecond;
        /** Spark's processing rate for this source. */
        public double processedRowsPerSecond;
    }

    private static final ObjectMapper MAPPER = new ObjectMapper();
    static final String MEMBER_KEY = "@member";
    static final String FLOW_KEY = "@flow";

    private ProgressParser() {
    }

    /**
     * Parses one source of a progress event.
     *
     * @param description Spark's description of the source
     * @param latestJson the source's {@code latestOffset} JSON (may be null)
     * @param endJson the source's {@code endOffset} JSON (may be null)
     * @return the snapshot, or null when the source is not a {@code kafka-group} source
     * @throws IOException when the JSON of a {@code kafka-group} source cannot be parsed
     */
    public static SourceSnapshot parse(String description, String latestJson, String endJson) throws IOException {
        if (description == null || !description.contains("PythonMicroBatchStream")) {
            return null;
        }
        if (latestJson == null || latestJson.isEmpty() || latestJson.charAt(0) != '{') {
            return null;
        }
        JsonNode latest = MAPPER.readTree(latestJson);
        JsonNode member = latest.get(MEMBER_KEY);
        if (member == null || !member.isObject() || !member.has("group")) {
            return null;
        }
        SourceSnapshot snap = new SourceSnapshot();
        snap.group = member.get("group").asText();
        JsonNode generation = member.get("generation");
        if (generation != null && generation.isNumber()) {
            snap.generation = generation.asLong();
        }
        JsonNode owned = member.get("owned");
        if (owned != null && owned.isObject()) {
            snap.owned = countPartitions(owned);
        } else {
            snap.owned = countPartitions(topicsOnly(latest));
        }
        JsonNode flow = latest.get(FLOW_KEY);
        if (flow != null && flow.isObject()) {
            snap.paused = countPartitions(flow.get("paused"));
            snap.held = countPartitions(flow.get("held"));
        }
        JsonNode end = endJson == null || endJson.isEmpty() ? null : MAPPER.readTree(endJson);
        for (Map.Entry<String, JsonNode> topic : latest.properties()) {
            if (topic.getKey().startsWith("@") || !topic.getValue().isObject()) {
                continue;
            }
            JsonNode endTopic = end == null ? null : end.get(topic.getKey());
            for (Map.Entry<String, JsonNode> partition : topic.getValue().properties()) {
                JsonNode endValue = endTopic == null ? null : endTopic.get(partition.getKey());
                Long position = position(endValue);
                Integer number = partitionNumber(partition.getKey());
                if (position == null || number == null || !partition.getValue().isNumber()) {
                    continue;
                }
                snap.lag.computeIfAbsent(topic.getKey(), t -> new TreeMap<>())
                        .put(number, partition.getValue().asLong() - position);
            }
        }
        return snap;
    }

    /** The position an endOffset entry stands for: the number, or a range's {@code until}. */
    static Long position(JsonNode value) {
        if (value == null) {
            return null;
        }
        if (value.isNumber()) {
            return value.asLong();
        }
        if (value.isArray() && value.size() == 2 && value.get(1).isNumber()) {
            return value.get(1).asLong();
        }
        return null;
    }

    /**
     * Counts partitions in {@code {"topic": [p, ...]}} or {@code {"topic": {"p": ...}}}.
     */
    static long countPartitions(JsonNode byTopic) {
        if (byTopic == null || !byTopic.isObject()) {
            return 0;
        }
        long count = 0;
        Iterator<JsonNode> values = byTopic.elements();
        while (values.hasNext()) {
            JsonNode value = values.next();
            if (value.isArray() || value.isObject()) {
                count += value.size();
            }
        }
        return count;
    }

    private static Integer partitionNumber(String key) {
        try {
            return Integer.valueOf(key);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    private static JsonNode topicsOnly(JsonNode latest) {
        com.fasterxml.jackson.databind.node.ObjectNode topics = MAPPER.createObjectNode();
        for (Map.Entry<String, JsonNode> field : latest.properties()) {
            if (!field.getKey().startsWith("@")) {
                topics.set(field.getKey(), field.getValue());
            }
        }
        return topics;
    }
}
