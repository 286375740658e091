package lab.storm;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.kafka.spout.FirstPollOffsetStrategy;
import org.apache.storm.kafka.spout.KafkaSpout;
import org.apache.storm.kafka.spout.KafkaSpoutConfig;
import org.apache.storm.kafka.spout.KafkaSpoutConfig.ProcessingGuarantee;
import org.apache.storm.kafka.spout.KafkaSpoutRetryExponentialBackoff;
import org.apache.storm.kafka.spout.KafkaSpoutRetryExponentialBackoff.TimeInterval;
import org.apache.storm.kafka.spout.trident.KafkaTridentSpoutConfig;
import org.apache.storm.kafka.spout.trident.KafkaTridentSpoutTransactional;
import org.apache.storm.task.IMetricsContext;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.topology.base.BaseRichBolt;
import org.apache.storm.trident.TridentTopology;
import org.apache.storm.trident.operation.TridentCollector;
import org.apache.storm.trident.state.BaseStateUpdater;
import org.apache.storm.trident.state.State;
import org.apache.storm.trident.state.StateFactory;
import org.apache.storm.trident.tuple.TridentTuple;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;
import org.apache.storm.utils.TupleUtils;

/**
 * The lab's Storm topology, run in a LocalCluster inside this JVM (python -m lab.pipelines.driver starts it).
 *
 * <p>Storm reads the run's topic; writing the sink, the timeline and the named fault points stay with the
 * driver's Python process, which this JVM asks over its standard streams (the {@link Bridge} protocol in
 * lab/pipelines/storm.py). A driver crash kills both, as one process group.
 *
 * <p>Modes ({@code storm_mode} in the spec file):
 * <ul>
 *   <li>{@code unacked}: no acker; the Kafka spout commits each poll's offsets before it emits
 *       (ProcessingGuarantee.AT_MOST_ONCE): at most once.</li>
 *   <li>{@code acked}: spout to parse bolt to sink bolt, every emit anchored, one acker; the spout commits
 *       offsets only for acked tuples (AT_LEAST_ONCE) and replays failed or timed-out ones: at least once.</li>
 *   <li>{@code trident}: KafkaTridentSpoutTransactional (a batch's offsets stored by txid in ZooKeeper, so a
 *       replayed txid has the same tuples) into a State that writes the batch with its txid: exactly once with
 *       a sink that skips a txid it has committed.</li>
 * </ul>
 */
public final class LabTopology {
    private LabTopology() {
    }

    static final ObjectMapper JSON = new ObjectMapper();

    /** Lines to the driver, and its answers; one request at a time for the whole JVM. */
    static final class Bridge {
        private static PrintStream out;
        private static BufferedReader in;

        static synchronized void open(PrintStream o) {
            out = o;
            in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        }

        static synchronized void say(Map<String, Object> message) {
            try {
                out.println("@lab " + JSON.writeValueAsString(message));
                out.flush();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }

        /** Send a request and wait for its answer; the driver closing its end ends this JVM. */
        @SuppressWarnings("unchecked")
        static synchronized Map<String, Object> ask(Map<String, Object> request) {
            say(request);
            try {
                String line = in.readLine();
                if (line == null) {
                    Runtime.getRuntime().halt(0);
                }
                return JSON.readValue(line, Map.class);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }
    }

    static List<Object> row(Object partition, Object offset, Object value) {
        return Arrays.asList(partition, offset, value);
    }

    /** First bolt of the acked tree: passes each record on, anchored to the spout's tuple, and acks its input. */
    public static final class ParseBolt extends BaseBasicBolt {
        @Override
        public void execute(Tuple input, BasicOutputCollector collector) {
            // BaseBasicBolt anchors the emit to input and acks input when execute returns.
            collector.emit(new Values(input.getValueByField("partition"), input.getValueByField("offset"),
                    input.getValueByField("value")));
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
            declarer.declare(new Fields("partition", "offset", "value"));
        }
    }

    /**
     * Buffers tuples and asks the driver to write them as one batch, then acks them (or fails those the driver
     * names). A batch closes at maxRecords tuples, or once its first tuple is intervalMs old (checked on each
     * tuple and on the one-second tick).
     */
    public static final class SinkBolt extends BaseRichBolt {
        private final int maxRecords;
        private final long intervalMs;
        private transient OutputCollector collector;
        private transient List<Tuple> buffer;
        private transient long firstAt;

        public SinkBolt(int maxRecords, long intervalMs) {
            this.maxRecords = maxRecords;
            this.intervalMs = intervalMs;
        }

        @Override
        public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
            this.collector = collector;
            this.buffer = new ArrayList<>();
            Map<String, Object> ready = new LinkedHashMap<>();
            ready.put("op", "ready");
            ready.put("component", "sink-bolt");
            Bridge.say(ready);
        }

        @Override
        public void execute(Tuple tuple) {
            if (!TupleUtils.isTick(tuple)) {
                if (buffer.isEmpty()) {
                    firstAt = System.currentTimeMillis();
                }
                buffer.add(tuple);
            }
            if (!buffer.isEmpty()
                    && (buffer.size() >= maxRecords || System.currentTimeMillis() - firstAt >= intervalMs)) {
                flush();
            }
        }

        private void flush() {
            List<List<Object>> rows = new ArrayList<>();
            for (Tuple t : buffer) {
                rows.add(row(t.getValueByField("partition"), t.getValueByField("offset"), t.getValueByField("value")));
            }
            Map<String, Object> request = new LinkedHashMap<>();
            request.put("op", "write");
            request.put("rows", rows);
            Map<String, Object> answer = Bridge.ask(request);
            List<?> fail = (List<?>) answer.getOrDefault("fail", List.of());
            boolean[] failed = new boolean[buffer.size()];
            for (Object i : fail) {
                failed[((Number) i).intValue()] = true;
            }
            int acked = 0;
            for (int i = 0; i < buffer.size(); i++) {
                if (failed[i]) {
                    collector.fail(buffer.get(i));
                } else {
                    collector.ack(buffer.get(i));
                    acked++;
                }
            }
            Map<String, Object> done = new LinkedHashMap<>();
            done.put("op", "acked");
            done.put("batch", answer.get("batch"));
            done.put("acked", acked);
            done.put("failed", fail.size());
            Bridge.say(done);
            buffer.clear();
        }

        @Override
        public Map<String, Object> getComponentConfiguration() {
            Map<String, Object> conf = new HashMap<>();
            conf.put(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1);
            return conf;
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {
        }
    }

    /** Trident's state: each batch written with its transaction id, which the sink stores as the batch's key. */
    public static final class SinkState implements State {
        private Long txid;

        @Override
        public void beginCommit(Long txid) {
            this.txid = txid;
        }

        @Override
        public void commit(Long txid) {
            Map<String, Object> done = new LinkedHashMap<>();
            done.put("op", "committed");
            done.put("txid", txid);
            Bridge.say(done);
        }

        void write(List<TridentTuple> tuples) {
            List<List<Object>> rows = new ArrayList<>();
            for (TridentTuple t : tuples) {
                rows.add(row(t.getValueByField("partition"), t.getValueByField("offset"), t.getValueByField("value")));
            }
            Map<String, Object> request = new LinkedHashMap<>();
            request.put("op", "write");
            request.put("txid", txid);
            request.put("rows", rows);
            Bridge.ask(request);
        }
    }

    public static final class SinkStateFactory implements StateFactory {
        @Override
        public State makeState(Map<String, Object> conf, IMetricsContext metrics, int partitionIndex,
                               int numPartitions) {
            Map<String, Object> ready = new LinkedHashMap<>();
            ready.put("op", "ready");
            ready.put("component", "trident-state");
            Bridge.say(ready);
            return new SinkState();
        }
    }

    public static final class SinkUpdater extends BaseStateUpdater<SinkState> {
        @Override
        public void updateState(SinkState state, List<TridentTuple> tuples, TridentCollector collector) {
            if (!tuples.isEmpty()) {
                state.write(tuples);
            }
        }
    }

    static final Fields RECORD = new Fields("partition", "offset", "value");

    static StormTopology acked(Map<String, Object> spec, ProcessingGuarantee guarantee) {
        String bootstrap = (String) spec.get("bootstrap");
        String topic = (String) spec.get("topic");
        int maxRecords = ((Number) spec.get("max_batch_records")).intValue();
        long intervalMs = ((Number) spec.get("batch_interval_ms")).longValue();
        KafkaSpoutConfig<String, String> config = KafkaSpoutConfig.builder(bootstrap, topic)
                .setProp("group.id", spec.get("group"))
                .setProp("max.poll.records", maxRecords)
                .setProp("isolation.level", spec.get("isolation"))
                .setProcessingGuarantee(guarantee)
                // Where a restarted spout begins: the group's committed offsets, else the earliest.
                .setFirstPollOffsetStrategy(FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST)
                .setOffsetCommitPeriodMs(((Number) spec.get("commit_period_ms")).longValue())
                .setMaxUncommittedOffsets(((Number) spec.get("max_uncommitted")).intValue())
                // A failed tuple is emitted again after 0.2 s, then 0.4, ... up to 2 s, without a limit on retries.
                .setRetry(new KafkaSpoutRetryExponentialBackoff(TimeInterval.milliSeconds(200),
                        TimeInterval.milliSeconds(200), Integer.MAX_VALUE, TimeInterval.seconds(2)))
                .setPollTimeoutMs(((Number) spec.get("poll_timeout_ms")).longValue())
                .setRecordTranslator(r -> new Values(r.partition(), r.offset(), r.value()), RECORD)
                .build();
        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout("kafka-spout", new KafkaSpout<>(config), 1);
        builder.setBolt("parse-bolt", new ParseBolt(), 1).shuffleGrouping("kafka-spout");
        builder.setBolt("sink-bolt", new SinkBolt(maxRecords, intervalMs), 1).globalGrouping("parse-bolt");
        return builder.createTopology();
    }

    static StormTopology trident(Map<String, Object> spec) {
        String bootstrap = (String) spec.get("bootstrap");
        String topic = (String) spec.get("topic");
        KafkaTridentSpoutConfig<String, String> config = KafkaTridentSpoutConfig.builder(bootstrap, topic)
                .setProp("group.id", spec.get("group"))
                .setProp("max.poll.records", ((Number) spec.get("max_batch_records")).intValue())
                .setProp("isolation.level", spec.get("isolation"))
                // With no batch metadata in ZooKeeper for this stream, the earliest; else where its last batch ended.
                .setFirstPollOffsetStrategy(FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST)
                // A replayed txid is re-emitted by one poll per partition: what that poll returns is the batch.
                .setPollTimeoutMs(((Number) spec.get("poll_timeout_ms")).longValue())
                .setRecordTranslator(r -> new Values(r.partition(), r.offset(), r.value()), RECORD)
                .build();
        TridentTopology topology = new TridentTopology();
        // The stream's name keys its transaction state in ZooKeeper: a restarted topology resumes it.
        topology.newStream((String) spec.get("stream"), new CompleteReplaySpout((String) spec.get("stream"), new KafkaTridentSpoutTransactional<>(config)))
                .parallelismHint(1)
                .partitionPersist(new SinkStateFactory(), RECORD, new SinkUpdater())
                .parallelismHint(1);
        return topology.build();
    }

    public static void main(String[] args) {
        try {
            start(args);
        } catch (Throwable t) {
            // LocalCluster's daemon threads are not daemons: without a halt a failed start would leave the JVM up,
            // and its driver waiting for a "submitted" that never comes.
            System.err.println("ERROR lab.storm.LabTopology - the topology did not start");
            t.printStackTrace();
            System.err.flush();
            Runtime.getRuntime().halt(1);
        }
    }

    @SuppressWarnings("unchecked")
    static void start(String[] args) throws Exception {
        PrintStream bridge = System.out;
        System.setOut(System.err);  // anything else printed goes to the log, never into the protocol
        Bridge.open(bridge);
        Map<String, Object> spec = JSON.readValue(new File(args[0]), Map.class);
        String mode = (String) spec.get("storm_mode");

        Map<String, Object> daemon = new HashMap<>();
        // The lab's ZooKeeper on 127.0.0.1: LocalCluster starts none of its own (its own would listen on every
        // interface) and Trident's transaction state outlives this JVM there.
        daemon.put(Config.STORM_ZOOKEEPER_SERVERS, List.of((String) spec.get("zookeeper_host")));
        daemon.put(Config.STORM_ZOOKEEPER_PORT, ((Number) spec.get("zookeeper_port")).intValue());
        // The cluster's own state under this attempt's root: a dead attempt's assignments are not this one's.
        daemon.put(Config.STORM_ZOOKEEPER_ROOT, spec.get("cluster_root"));
        daemon.put(Config.STORM_LOCAL_DIR, spec.get("local_dir"));
        daemon.put(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, true);
        // Nimbus's metrics store is RocksDB by default (a 71 MB jar); the lab reads no Storm metrics.
        daemon.put("storm.metricstore.class", "org.apache.storm.metricstore.NoOpMetricStore");
        LocalCluster cluster = new LocalCluster.Builder().withSupervisors(1).withPortsPerSupervisor(1)
                .withDaemonConf(daemon).build();

        Config conf = new Config();
        conf.setNumWorkers(1);
        conf.setMessageTimeoutSecs(((Number) spec.get("message_timeout_s")).intValue());
        conf.put(Config.TRANSACTIONAL_ZOOKEEPER_ROOT, spec.get("transactional_root"));
        StormTopology topology;
        if ("trident".equals(mode)) {
            conf.setNumAckers(1);
            conf.setMaxSpoutPending(1);  // one batch in flight: its txid commits before the next is emitted
            conf.put(Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS, spec.get("batch_interval_ms"));
            topology = trident(spec);
        } else if ("acked".equals(mode)) {
            conf.setNumAckers(1);
            conf.setMaxSpoutPending(((Number) spec.get("max_uncommitted")).intValue());
            topology = acked(spec, ProcessingGuarantee.AT_LEAST_ONCE);
        } else if ("unacked".equals(mode)) {
            conf.setNumAckers(0);  // no acker: no tuple is tracked, none is replayed
            topology = acked(spec, ProcessingGuarantee.AT_MOST_ONCE);
        } else {
            throw new IllegalArgumentException("storm_mode " + mode + ": valid choices: unacked, acked, trident");
        }
        cluster.submitTopology((String) spec.get("name"), conf, topology);
        Map<String, Object> submitted = new LinkedHashMap<>();
        submitted.put("op", "submitted");
        submitted.put("storm_mode", mode);
        Bridge.say(submitted);
        Thread.currentThread().join();  // the driver ends this JVM: EOF on its input, or a signal
    }
}
