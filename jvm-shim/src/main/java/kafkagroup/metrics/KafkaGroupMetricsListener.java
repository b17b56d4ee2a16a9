package kafkagroup.metrics;

import org.apache.spark.SparkEnv;
import org.apache.spark.sql.streaming.SourceProgress;
import org.apache.spark.sql.streaming.StreamingQueryListener;
import org.apache.spark.sql.streaming.StreamingQueryProgress;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A streaming query listener that turns each progress event of a {@code kafka-group} source
 * into gauges in Spark's metrics system (source {@code kafka_group}).
 *
 * <p>Register it with
 * {@code spark.sql.streaming.streamingQueryListeners=kafkagroup.metrics.KafkaGroupMetricsListener}
 * or {@code spark.streams().addListener(new KafkaGroupMetricsListener())}. Gauges of a query
 * (names in {@code docs/metrics.md}), all prefixed {@code <query>.} where {@code <query>} is the
 * query name, or its id when it has none:
 * {@code <topic>.<partition>.lag}, {@code lag}, {@code ownedPartitions}, {@code pausedPartitions},
 * {@code heldPartitions}, {@code generation}, {@code numInputRows}, {@code inputRowsPerSecond},
 * {@code processedRowsPerSecond}. A query with several {@code kafka-group} sources gets their
 * sums (the highest generation). The gauges of a query are removed when it terminates.
 *
 * <p>A malformed progress entry is logged and skipped: metrics never fail a query.
 */
public class KafkaGroupMetricsListener extends StreamingQueryListener {

    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(KafkaGroupMetricsListener.class);
    private static final Object REGISTRATION_LOCK = new Object();
    private static KafkaGroupMetricsSource source;
    private static SparkEnv registeredWith;

    private final Map<UUID, String> queryKeys = new ConcurrentHashMap<>();

    /** Creates the listener; the metrics source is registered on the first progress event. */
    public KafkaGroupMetricsListener() {
    }

    /**
     * The metrics source, registered with the current SparkEnv's metrics system once per SparkEnv.
     * Shared by every listener instance of the JVM, so two registrations never add the same gauges twice.
     *
     * @return the source, or null when there is no SparkEnv
     */
    static KafkaGroupMetricsSource registeredSource() {
        synchronized (REGISTRATION_LOCK) {
            SparkEnv env = SparkEnv.get();
            if (env == null) {
                return null;
            }
            if (env != registeredWith) {
                source = new KafkaGroupMetricsSource();
                env.metricsSystem().registerSource(source);
                registeredWith = env;
                LOG.info("kafka-group metrics source '{}' registered", KafkaGroupMetricsSource.SOURCE_NAME);
            }
            return source;
        }
    }

    @Override
    public void onQueryStarted(QueryStartedEvent event) {
    }

    @Override
    public void onQueryProgress(QueryProgressEvent event) {
        StreamingQueryProgress progress = event.progress();
        try {
            String name = progress.name();
            String query = name == null || name.isEmpty() ? progress.id().toString() : name;
            Map<String, Number> values = gaugeValues(query, progress.sources());
            if (values == null) {
                return;
            }
            KafkaGroupMetricsSource target = registeredSource();
            if (target == null) {
                return;
            }
            String previous = queryKeys.put(progress.id(), query);
            if (previous != null && !previous.equals(query)) {
                target.removeQuery(previous);
            }
            target.update(query, values);
        } catch (Exception e) {
            LOG.warn("kafka-group metrics: could not read the progress of query {}: {}", progress.id(), e.toString());
        }
    }

    @Override
    public void onQueryTerminated(QueryTerminatedEvent event) {
        String query = queryKeys.remove(event.id());
        KafkaGroupMetricsSource target = source;
        if (query != null && target != null) {
            target.removeQuery(query);
        }
    }

    /**
     * The gauge values of one progress event, or null when no source is a {@code kafka-group} source.
     *
     * @param query the query key every name starts with
     * @param sources the progress event's sources
     * @return gauge name to value
     * @throws java.io.IOException when a {@code kafka-group} source's JSON cannot be parsed
     */
    static Map<String, Number> gaugeValues(String query, SourceProgress[] sources) throws java.io.IOException {
        Map<String, Number> values = new LinkedHashMap<>();
        long totalLag = 0;
        long owned = 0;
        long paused = 0;
        long held = 0;
        long generation = -1;
        long rows = 0;
        double inputRate = 0;
        double processedRate = 0;
        boolean found = false;
        for (SourceProgress sp : sources) {
            ProgressParser.SourceSnapshot snap =
                    ProgressParser.parse(sp.description(), sp.latestOffset(), sp.endOffset());
            if (snap == null) {
                continue;
            }
            found = true;
            for (Map.Entry<String, Map<Integer, Long>> topic : snap.lag.entrySet()) {
                for (Map.Entry<Integer, Long> partition : topic.getValue().entrySet()) {
                    String lagName = query + "." + topic.getKey() + "." + partition.getKey() + ".lag";
                    long lag = partition.getValue();
                    Number before = values.get(lagName);
                    values.put(lagName, before == null ? lag : before.longValue() + lag);
                    totalLag += lag;
                }
            }
            owned += snap.owned;
            paused += snap.paused;
            held += snap.held;
            generation = Math.max(generation, snap.generation);
            rows += sp.numInputRows();
            inputRate += finite(sp.inputRowsPerSecond());
            processedRate += finite(sp.processedRowsPerSecond());
        }
        if (!found) {
            return null;
        }
        values.put(query + ".lag", totalLag);
        values.put(query + ".ownedPartitions", owned);
        values.put(query + ".pausedPartitions", paused);
        values.put(query + ".heldPartitions", held);
        values.put(query + ".generation", generation);
        values.put(query + ".numInputRows", rows);
        values.put(query + ".inputRowsPerSecond", inputRate);
        values.put(query + ".processedRowsPerSecond", processedRate);
        return values;
    }

    private static double finite(double value) {
        return Double.isNaN(value) || Double.isInfinite(value) ? 0.0 : value;
    }
}
