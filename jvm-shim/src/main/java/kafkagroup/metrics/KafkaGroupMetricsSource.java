package kafkagroup.metrics;

import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import org.apache.spark.metrics.source.Source;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A Spark metrics source named {@code kafka_group} whose gauges are set from query progress.
 *
 * <p>Each gauge reads a value kept in a map; {@link #update} replaces one query's values,
 * registers gauges for new names and removes the gauges the query no longer reports (a
 * partition that was revoked, a terminated query). Spark registers this source's registry as a
 * child of its own, so gauges added or removed later show up in every sink.
 */
public final class KafkaGroupMetricsSource implements Source {

    /** The source name: the first segment of every gauge after Spark's own prefix. */
    public static final String SOURCE_NAME = "kafka_group";

    private final MetricRegistry registry = new MetricRegistry();
    private final Map<String, Number> values = new ConcurrentHashMap<>();
    private final Map<String, Set<String>> namesByQuery = new ConcurrentHashMap<>();

    @Override
    public String sourceName() {
        return SOURCE_NAME;
    }

    @Override
    public MetricRegistry metricRegistry() {
        return registry;
    }

    /**
     * Replaces the gauges of one query.
     *
     * @param query the query's key (its name, or its id)
     * @param newValues gauge name (without the source name) to value; every name starts with {@code query + "."}
     */
    public synchronized void update(String query, Map<String, Number> newValues) {
        Set<String> previous = namesByQuery.getOrDefault(query, new HashSet<>());
        for (String stale : previous) {
            if (!newValues.containsKey(stale)) {
                registry.remove(stale);
                values.remove(stale);
            }
        }
        for (Map.Entry<String, Number> entry : newValues.entrySet()) {
            final String name = entry.getKey();
            boolean isNew = values.put(name, entry.getValue()) == null;
            if (isNew && !registry.getNames().contains(name)) {
                registry.register(name, (Gauge<Number>) () -> values.getOrDefault(name, 0L));
            }
        }
        namesByQuery.put(query, new HashSet<>(newValues.keySet()));
    }

    /**
     * Removes every gauge of one query.
     *
     * @param query the query's key (its name, or its id)
     */
    public synchronized void removeQuery(String query) {
        Set<String> names = namesByQuery.remove(query);
        if (names == null) {
            return;
        }
        for (String name : names) {
            registry.remove(name);
            values.remove(name);
        }
    }
}
