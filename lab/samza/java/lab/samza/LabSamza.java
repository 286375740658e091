package lab.samza;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileInputStream;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.samza.application.TaskApplication;
import org.apache.samza.application.descriptors.TaskApplicationDescriptor;
import org.apache.samza.config.Config;
import org.apache.samza.config.MapConfig;
import org.apache.samza.context.Context;
import org.apache.samza.operators.KV;
import org.apache.samza.runtime.LocalApplicationRunner;
import org.apache.samza.serializers.KVSerde;
import org.apache.samza.serializers.StringSerde;
import org.apache.samza.storage.kv.KeyValueIterator;
import org.apache.samza.storage.kv.KeyValueStore;
import org.apache.samza.system.IncomingMessageEnvelope;
import org.apache.samza.system.OutgoingMessageEnvelope;
import org.apache.samza.system.SystemStream;
import org.apache.samza.system.kafka.descriptors.KafkaInputDescriptor;
import org.apache.samza.system.kafka.descriptors.KafkaOutputDescriptor;
import org.apache.samza.system.kafka.descriptors.KafkaSystemDescriptor;
import org.apache.samza.task.InitableTask;
import org.apache.samza.task.MessageCollector;
import org.apache.samza.task.StreamTask;
import org.apache.samza.task.StreamTaskFactory;
import org.apache.samza.task.TaskCoordinator;
import org.apache.samza.task.WindowableTask;

/**
 * The lab's Samza job: a running count per event key in a RocksDB store backed by a Kafka changelog.
 *
 * <p>A standalone job (LocalApplicationRunner, PassthroughJobCoordinator: one processor owns every partition,
 * one task per input partition), started by lab/pipelines/samza.py in the driver's process group. Each input
 * event increments its key's count in the store "counts" (the store writes the new value to the changelog) and
 * is sent to the output topic unchanged but for a "processed" field with the count. Samza checkpoints the input
 * offsets every task.commit.ms, after flushing the producer and the store. What the lab needs to see goes to the
 * driver as "@lab {json}" lines on standard output (everything else is logged to standard error): ready, each
 * task's restored keys, each window's offsets.
 */
public final class LabSamza implements TaskApplication {
    static final String SYSTEM = "kafka";
    static final ObjectMapper JSON = new ObjectMapper();
    static final long STARTED = System.currentTimeMillis();
    static final AtomicBoolean READY = new AtomicBoolean();
    /** The driver asked the job to stop: each task commits at its next window, then the container shuts down. */
    static volatile boolean stopping;
    /** The driver's end of the pipe closed: nobody answers any more. */
    static volatile boolean inputClosed;
    static final AtomicInteger TASKS = new AtomicInteger();
    static final AtomicInteger COMMITTED = new AtomicInteger();
    /** The driver's answers to "window" lines, one line each. */
    static final BlockingQueue<String> ANSWERS = new LinkedBlockingQueue<>();
    /** Seconds a window waits for its answer (the driver stops at a named point until it is killed). */
    static final long ANSWER_WAIT_S = 120;
    private static PrintStream bridge = System.out;

    static synchronized void say(Map<String, Object> message) {
        try {
            bridge.println("@lab " + JSON.writeValueAsString(message));
            bridge.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    @Override
    public void describe(TaskApplicationDescriptor app) {
        Config cfg = app.getConfig();
        String input = cfg.get("lab.input.topic");
        String output = cfg.get("lab.output.topic");
        int attempt = cfg.getInt("lab.attempt");
        KafkaSystemDescriptor kafka = new KafkaSystemDescriptor(SYSTEM);
        KVSerde<String, String> serde = KVSerde.of(new StringSerde("UTF-8"), new StringSerde("UTF-8"));
        // Stream ids without dots (they become config keys); the topics' names are their physical names.
        KafkaInputDescriptor<KV<String, String>> in = kafka.getInputDescriptor("input", serde).withPhysicalName(input);
        KafkaOutputDescriptor<KV<String, String>> out = kafka.getOutputDescriptor("output", serde)
                .withPhysicalName(output);
        app.withDefaultSystem(kafka).withInputStream(in).withOutputStream(out)
                .withTaskFactory((StreamTaskFactory) () -> new CountTask(output, attempt));
    }

    /** One task per input partition: its own store partition and changelog partition. */
    public static final class CountTask implements StreamTask, InitableTask, WindowableTask {
        private final SystemStream output;
        private final int attempt;
        private KeyValueStore<String, String> store;
        private int partition = -1;
        private long first = -1;
        private long last = -1;
        private int rows;
        private boolean commitAsked;
        private int windowsSinceCommits;

        CountTask(String output, int attempt) {
            this.output = new SystemStream(SYSTEM, output);
            this.attempt = attempt;
        }

        @SuppressWarnings("unchecked")
        @Override
        public void init(Context context) {
            // Samza restored the store from its changelog before init: what it holds now is what was restored.
            store = (KeyValueStore<String, String>) context.getTaskContext().getStore("counts");
            partition = context.getTaskContext().getTaskModel().getChangelogPartition().getPartitionId();
            int keys = 0;
            long total = 0;
            KeyValueIterator<String, String> it = store.all();
            try {
                while (it.hasNext()) {
                    total += count(it.next().getValue());
                    keys++;
                }
            } finally {
                it.close();
            }
            Map<String, Object> restored = new LinkedHashMap<>();
            restored.put("op", "restored");
            restored.put("task", context.getTaskContext().getTaskModel().getTaskName().getTaskName());
            restored.put("partition", partition);
            restored.put("keys", keys);
            restored.put("counted", total);
            restored.put("took_s", (System.currentTimeMillis() - STARTED) / 1000.0);
            say(restored);
            TASKS.incrementAndGet();
            if (READY.compareAndSet(false, true)) {
                Map<String, Object> ready = new LinkedHashMap<>();
                ready.put("op", "ready");
                say(ready);
            }
        }

        static long count(String value) {
            try {
                return value == null ? 0 : JSON.readTree(value).get("count").asLong();
            } catch (Exception e) {
                throw new IllegalStateException("store value is not a count: " + value, e);
            }
        }

        @Override
        public void process(IncomingMessageEnvelope envelope, MessageCollector collector, TaskCoordinator coordinator)
                throws Exception {
            String value = (String) envelope.getMessage();
            long offset = Long.parseLong(envelope.getOffset());
            JsonNode event = JSON.readTree(value);
            JsonNode keyNode = event.get("key");
            if (keyNode == null || value.lastIndexOf('}') < 0) {
                throw new IllegalArgumentException("not a lab event at " + partition + "@" + offset + ": " + value);
            }
            String key = keyNode.asText();
            long next = count(store.get(key)) + 1;
            store.put(key, "{\"count\":" + next + ",\"attempt\":" + attempt + ",\"offset\":" + offset + "}");
            // The event's own JSON first (id, seq, key stay where the audit reads them), then what processed it.
            String processed = value.substring(0, value.lastIndexOf('}'))
                    + ",\"processed\":{\"by\":\"samza\",\"count\":" + next + ",\"attempt\":" + attempt
                    + ",\"source\":[" + partition + "," + offset + "]}}";
            collector.send(new OutgoingMessageEnvelope(output, envelope.getSystemStreamPartition().getPartition()
                    .getPartitionId(), key, processed));
            if (first < 0) {
                first = offset;
            }
            last = offset;
            rows++;
        }

        @Override
        public void window(MessageCollector collector, TaskCoordinator coordinator) {
            if (stopping) {
                // A stop checkpoints first: the store's changes (the changelog) and the output are flushed, then the
                // offsets written, so the changelog holds every processed event's count. Measured without it: a
                // SIGTERM two seconds after a restart left 23 of 64 keys' last counts out of the changelog.
                if (!commitAsked) {
                    commitAsked = true;
                    coordinator.commit(TaskCoordinator.RequestScope.CURRENT_TASK);
                    COMMITTED.incrementAndGet();
                } else if (COMMITTED.get() >= TASKS.get() && ++windowsSinceCommits >= 2) {
                    coordinator.shutdown(TaskCoordinator.RequestScope.ALL_TASKS_IN_CONTAINER);
                }
            }
            if (rows == 0) {
                return;
            }
            Map<String, Object> window = new LinkedHashMap<>();
            window.put("op", "window");
            window.put("partition", partition);
            window.put("from", first);
            window.put("until", last + 1);
            window.put("rows", rows);
            say(window);
            first = -1;
            rows = 0;
            // The task waits for the driver, which writes the lab's batch events and may stop at a named point
            // (after-output-before-commit: the window's events sent, no checkpoint since) until it is killed.
            try {
                if (!inputClosed) {
                    ANSWERS.poll(ANSWER_WAIT_S, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        bridge = System.out;
        System.setOut(System.err);  // anything else printed goes to the log, never into the protocol
        Properties props = new Properties();
        try (InputStreamReader f = new InputStreamReader(new FileInputStream(args[0]), StandardCharsets.UTF_8)) {
            props.load(f);
        }
        Map<String, String> config = new HashMap<>();
        for (String k : props.stringPropertyNames()) {
            config.put(k, props.getProperty(k));
        }
        LocalApplicationRunner runner = new LocalApplicationRunner(new LabSamza(), new MapConfig(config));
        Thread reader = new Thread(() -> {  // the driver's answers, and "stop"; its end of the pipe closing means stop
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if ("stop".equals(line.trim())) {
                        stopping = true;
                    } else {
                        ANSWERS.offer(line);
                    }
                }
            } catch (Exception e) {
                // nothing to read any more: stop as asked
            }
            inputClosed = true;
            stopping = true;
            ANSWERS.offer("");  // a window waiting for an answer goes on
        }, "lab-driver-input");
        reader.setDaemon(true);
        reader.start();
        // LocalApplicationRunner registers no shutdown hook: without this a SIGTERM ends the JVM unflushed.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            runner.kill();
            runner.waitForFinish(Duration.ofSeconds(20));
        }));
        runner.run();
        runner.waitForFinish();
    }
}
