package kafkagroup.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;

import org.junit.jupiter.api.Test;

/**
 * {@link ProgressParser} on the sample documents shared with the Python tests
 * ({@code tests/data/formats}, given as the system property {@code kafkagroup.formats.dir}
 * by the Maven build): the two parsers of query progress read them alike.
 */
class ProgressParserTest {

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private static Path samples() {
        String dir = System.getProperty("kafkagroup.formats.dir");
        Path path = dir != null ? Paths.get(dir) : Paths.get("..", "tests", "data", "formats");
        assertTrue(Files.isDirectory(path), "the shared sample documents are not at " + path.toAbsolutePath());
        return path;
    }

    /** Spark's {@code SourceProgress.latestOffset()} etc.: the offset's JSON text, or null. */
    private static String offset(JsonNode source, String key) {
        JsonNode value = source.get(key);
        return value == null || value.isNull() ? null : value.isTextual() ? value.asText() : value.toString();
    }

    private static ProgressParser.SourceSnapshot[] parseEvent(String name) throws IOException {
        JsonNode event = MAPPER.readTree(Files.readString(samples().resolve(name), StandardCharsets.UTF_8));
        JsonNode sources = event.get("sources");
        ProgressParser.SourceSnapshot[] snapshots = new ProgressParser.SourceSnapshot[sources.size()];
        for (int i = 0; i < sources.size(); i++) {
            JsonNode source = sources.get(i);
            snapshots[i] = ProgressParser.parse(source.get("description").asText(),
                    offset(source, "latestOffset"), offset(source, "endOffset"));
        }
        return snapshots;
    }

    @Test
    void readsTheKafkaGroupSourceOfAProgressEventAndSkipsTheOther() throws IOException {
        ProgressParser.SourceSnapshot[] snapshots = parseEvent("progress_event.json");
        assertEquals(2, snapshots.length);
        assertNull(snapshots[1], "Spark's own Kafka source is not a kafka-group source");
        ProgressParser.SourceSnapshot snap = snapshots[0];
        assertNotNull(snap);
        assertEquals(Map.of("orders", Map.of(0, 120L, 1, 0L, 2, 15L)), snap.lag);
        assertEquals("orders-etl", snap.group);
        assertEquals(3, snap.generation);
        assertEquals(3, snap.owned);
        assertEquals(1, snap.paused);
        assertEquals(1, snap.held);
    }

    @Test
    void aSourceWithoutAReportYetIsSkipped() throws IOException {
        ProgressParser.SourceSnapshot[] snapshots = parseEvent("progress_event_first_batch.json");
        assertEquals(1, snapshots.length);
        assertNull(snapshots[0]);
        assertNull(ProgressParser.parse("PythonMicroBatchStream@1", "null", null));
        assertNull(ProgressParser.parse("RateStream", "42", "42"));
    }

    @Test
    void aMalformedMemberReportIsRefused() {
        ProgressParser.FormatException e = assertThrows(ProgressParser.FormatException.class,
                () -> parseEvent("progress_event_bad_member.json"));
        assertTrue(e.getMessage().contains("'@member.generation' must be a number, found \"three\""), e.getMessage());
    }

    @Test
    void aMalformedEndOffsetIsRefused() {
        ProgressParser.FormatException e = assertThrows(ProgressParser.FormatException.class,
                () -> parseEvent("progress_event_bad_end.json"));
        assertTrue(e.getMessage().contains("endOffset: orders-0 must be an offset >= 0 or a range [from, until]"),
                e.getMessage());
    }

    @Test
    void anUnknownKeyOfTheOffsetDocumentIsRefused() throws IOException {
        String latest = "{\"orders\":{\"0\":900},\"@member\":{\"group\":\"orders-etl\"}}";
        String end = Files.readString(samples().resolve("offset_document_unknown_key.json"), StandardCharsets.UTF_8);
        ProgressParser.FormatException e = assertThrows(ProgressParser.FormatException.class,
                () -> ProgressParser.parse("PythonMicroBatchStream@1", latest, end));
        assertTrue(e.getMessage().contains("unknown key '@epoch'"), e.getMessage());
        String good = Files.readString(samples().resolve("offset_document.json"), StandardCharsets.UTF_8);
        ProgressParser.SourceSnapshot snap = ProgressParser.parse("PythonMicroBatchStream@1", latest, good);
        assertEquals(Map.of("orders", Map.of(0, 400L)), snap.lag);
        assertEquals(1, snap.owned, "without @member.owned, the partitions with a latest offset");
    }
}
