package kafkagroup.metrics;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Reads one {@code kafka-group} source's entry of a streaming query progress.
 *
 * <p>The Java twin of {@code kafka_group.formats.read_progress} (the Python owner of these
 * documents); both follow the same rules and are tested on the same sample documents
 * ({@code tests/data/formats}):
 *
 * <ul>
 *   <li>A source is a {@code kafka-group} source when its {@code latestOffset} is a JSON object
 *       holding an {@code "@member"} object. Other sources (Spark describes every Python source
 *       the same way, {@code PythonMicroBatchStream@hash}, so the description cannot tell) are
 *       skipped.</li>
 *   <li>{@code latestOffset}: per topic, per partition, the latest broker offset (a number
 *       {@code >= 0}), plus {@code @member} (group, generation, owned partitions) and
 *       {@code @flow} (paused, held partitions, control folder).</li>
 *   <li>{@code endOffset}, the source's offset document: per topic, per partition, the position
 *       (a number) or the batch's planned range {@code [from, until]}, whose {@code until} is the
 *       position after the batch; plus the keys {@code @group}, {@code @offsetsTable},
 *       {@code @flow}.</li>
 * </ul>
 *
 * <p>Lag of a partition is {@code latest - position}. Partitions with a latest offset but no
 * position yet (assigned, not planned) get no lag. A {@code kafka-group} source whose documents
 * do not have this form is refused with a {@link FormatException} naming what was expected and
 * what was found.
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
        /** The consumer group id, or null when not reported (option {@code assign}). */
        public String group;
        /** Records the batch read. */
        public long numInputRows;
        /** Spark's input rate for this source. */
        public double inputRowsPerSecond;
        /** Spark's processing rate for this source. */
        public double processedRowsPerSecond;
    }

    /** A {@code kafka-group} source's offsets are not of the form this parser knows. */
    public static final class FormatException extends IOException {
        private static final long serialVersionUID = 1L;

        FormatException(String message) {
            super(message);
        }
    }

    private static final ObjectMapper MAPPER = new ObjectMapper();
    static final String MEMBER_KEY = "@member";
    static final String FLOW_KEY = "@flow";
    /** The {@code @} keys of an offset document ({@code endOffset}). */
    static final List<String> DOCUMENT_KEYS = Arrays.asList("@group", "@offsetsTable", FLOW_KEY);
    /** The {@code @} keys of a {@code latestOffset} report. */
    static final List<String> REPORT_KEYS = Arrays.asList(MEMBER_KEY, FLOW_KEY);

    private ProgressParser() {
    }

    /**
     * Parses one source of a progress event.
     *
     * @param description Spark's description of the source, for messages only
     * @param latestJson the source's {@code latestOffset} JSON (may be null)
     * @param endJson the source's {@code endOffset} JSON (may be null)
     * @return the snapshot, or null when the source is not a {@code kafka-group} source
     * @throws FormatException when the documents of a {@code kafka-group} source are malformed
     */
    public static SourceSnapshot parse(String description, String latestJson, String endJson) throws IOException {
        JsonNode latest = jsonOrNull(latestJson);
        if (latest == null || !latest.isObject() || !latest.has(MEMBER_KEY)) {
            return null;
        }
        String where = "source " + description + ": ";
        JsonNode member = latest.get(MEMBER_KEY);
        if (!member.isObject()) {
            throw new FormatException(where + "latestOffset '" + MEMBER_KEY + "' must be an object, found " + member);
        }
        SourceSnapshot snap = new SourceSnapshot();
        JsonNode group = member.get("group");
        if (group != null && !group.isTextual()) {
            throw new FormatException(where + "'" + MEMBER_KEY + ".group' must be a string, found " + group);
        }
        snap.group = group == null ? null : group.asText();
        JsonNode generation = member.get("generation");
        if (generation != null && !generation.isIntegralNumber()) {
            throw new FormatException(where + "'" + MEMBER_KEY + ".generation' must be a number, found " + generation);
        }
        if (generation != null) {
            snap.generation = generation.asLong();
        }
        Map<String, Map<Integer, Long>> latestOffsets = offsets(latest, REPORT_KEYS, where + "latestOffset", false);
        JsonNode owned = member.get("owned");
        snap.owned = owned != null ? partitionLists(owned, where + "'" + MEMBER_KEY + ".owned'")
                : latestOffsets.values().stream().mapToLong(Map::size).sum();
        JsonNode flow = latest.get(FLOW_KEY);
        if (flow != null) {
            if (!flow.isObject()) {
                throw new FormatException(where + "latestOffset '" + FLOW_KEY + "' must be an object, found " + flow);
            }
            JsonNode paused = flow.get("paused");
            snap.paused = paused == null ? 0 : partitionLists(paused, where + "'" + FLOW_KEY + ".paused'");
            snap.held = held(flow.get("held"), where + "'" + FLOW_KEY + ".held'");
        }
        JsonNode end = jsonOrNull(endJson);
        if (endJson != null && !endJson.isBlank() && !"null".equals(endJson.trim()) && end == null) {
            throw new FormatException(where + "endOffset is not JSON, found " + endJson);
        }
        Map<String, Map<Integer, Long>> positions =
                end == null ? new TreeMap<>() : offsets(end, DOCUMENT_KEYS, where + "endOffset", true);
        for (Map.Entry<String, Map<Integer, Long>> topic : latestOffsets.entrySet()) {
            Map<Integer, Long> endTopic = positions.get(topic.getKey());
            for (Map.Entry<Integer, Long> partition : topic.getValue().entrySet()) {
                Long position = endTopic == null ? null : endTopic.get(partition.getKey());
                if (position != null) {
                    snap.lag.computeIfAbsent(topic.getKey(), t -> new TreeMap<>())
                            .put(partition.getKey(), partition.getValue() - position);
                }
            }
        }
        return snap;
    }

    /** The JSON value of an offset string, or null when there is none or it is not JSON (another source). */
    private static JsonNode jsonOrNull(String json) {
        if (json == null || json.isBlank()) {
            return null;
        }
        try {
            JsonNode node = MAPPER.readTree(json);
            return node == null || node.isNull() ? null : node;
        } catch (JsonProcessingException e) {
            return null;
        }
    }

    /**
     * {@code {topic: {partition: offset}}} of a document: positions ({@code ranges} true: a number
     * or {@code [from, until]}, the position being {@code until}) or latest offsets (a number).
     */
    static Map<String, Map<Integer, Long>> offsets(JsonNode doc, List<String> knownKeys, String what, boolean ranges)
            throws FormatException {
        if (!doc.isObject()) {
            throw new FormatException(what + " must be a JSON object, found " + doc);
        }
        Map<String, Map<Integer, Long>> result = new TreeMap<>();
        for (Map.Entry<String, JsonNode> topic : doc.properties()) {
            String name = topic.getKey();
            if (name.startsWith("@")) {
                if (!knownKeys.contains(name)) {
                    throw new FormatException(what + ": unknown key '" + name + "' (this version knows "
                            + String.join(", ", knownKeys) + ")");
                }
                continue;
            }
            if (!topic.getValue().isObject()) {
                throw new FormatException(what + ": topic '" + name + "' must map partitions to offsets, found "
                        + topic.getValue());
            }
            Map<Integer, Long> partitions = result.computeIfAbsent(name, t -> new TreeMap<>());
            for (Map.Entry<String, JsonNode> partition : topic.getValue().properties()) {
                int number = partitionNumber(partition.getKey(), name, what);
                JsonNode value = partition.getValue();
                if (isOffset(value)) {
                    partitions.put(number, value.asLong());
                } else if (ranges && value.isArray() && value.size() == 2 && isOffset(value.get(0))
                        && isOffset(value.get(1)) && value.get(0).asLong() <= value.get(1).asLong()) {
                    partitions.put(number, value.get(1).asLong());
                } else {
                    throw new FormatException(what + ": " + name + "-" + number + " must be an offset >= 0"
                            + (ranges ? " or a range [from, until]" : "") + ", found " + value);
                }
            }
        }
        return result;
    }

    /** Counts the partitions of {@code {"topic": [p, ...]}}. */
    static long partitionLists(JsonNode byTopic, String what) throws FormatException {
        if (!byTopic.isObject()) {
            throw new FormatException(what + " must be like {\"orders\": [0, 3]}, found " + byTopic);
        }
        Set<String> seen = new HashSet<>();
        for (Map.Entry<String, JsonNode> topic : byTopic.properties()) {
            if (!topic.getValue().isArray()) {
                throw new FormatException(what + ": topic '" + topic.getKey() + "' must map to a list of partitions, found "
                        + topic.getValue());
            }
            for (JsonNode p : topic.getValue()) {
                if (!p.isIntegralNumber() || p.asLong() < 0) {
                    throw new FormatException(what + ": partition " + p + " of topic '" + topic.getKey()
                            + "' must be a whole number >= 0");
                }
                seen.add(topic.getKey() + "\u0000" + p.asLong());
            }
        }
        return seen.size();
    }

    /** Counts the partitions of {@code {"topic": {"p": "rule"}}}; 0 when absent. */
    static long held(JsonNode byTopic, String what) throws FormatException {
        if (byTopic == null) {
            return 0;
        }
        if (!byTopic.isObject()) {
            throw new FormatException(what + " must be like {\"orders\": {\"0\": \"rule\"}}, found " + byTopic);
        }
        long count = 0;
        for (Map.Entry<String, JsonNode> topic : byTopic.properties()) {
            if (!topic.getValue().isObject()) {
                throw new FormatException(what + " must be like {\"orders\": {\"0\": \"rule\"}}, found " + byTopic);
            }
            for (Map.Entry<String, JsonNode> partition : topic.getValue().properties()) {
                partitionNumber(partition.getKey(), topic.getKey(), what);
                if (!partition.getValue().isTextual()) {
                    throw new FormatException(what + " must be like {\"orders\": {\"0\": \"rule\"}}, found " + byTopic);
                }
                count++;
            }
        }
        return count;
    }

    private static boolean isOffset(JsonNode value) {
        return value != null && value.isIntegralNumber() && value.asLong() >= 0;
    }

    private static int partitionNumber(String key, String topic, String what) throws FormatException {
        if (!key.isEmpty() && key.chars().allMatch(c -> c >= '0' && c <= '9')) {
            try {
                return Integer.parseInt(key);
            } catch (NumberFormatException e) {
                // too large: refused below
            }
        }
        throw new FormatException(what + ": partition \"" + key + "\" of topic '" + topic
                + "' must be a whole number >= 0");
    }
}
