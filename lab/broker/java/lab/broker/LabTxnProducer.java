package lab.broker;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Kafka's own Java producer writing transactions: what the broker records of each one's producer id and epoch is
 * read from its log afterwards ({@code lab.kafka.log_segments}, {@code lab.lessons.txn_epochs}).
 *
 * <p>Usage: {@code LabTxnProducer BOOTSTRAP TOPIC TRANSACTIONAL_ID TRANSACTIONS RECORDS [ABORT_EVERY]}. Writes
 * {@code TRANSACTIONS} transactions of {@code RECORDS} records each (keys {@code k00}..{@code k07}); with
 * {@code ABORT_EVERY} n, every n-th one is aborted instead of committed. A transaction is committed only after
 * every send in it succeeded: a failed send aborts it. One JSON line on standard output per transaction,
 * {@code {"op": "transaction", "index", "outcome", "records", "offsets": {partition: [first, last]}}}, then
 * {@code {"op": "done", "client"}}. The client's settings are set, not defaulted: {@code acks=all}, idempotence
 * on (a transactional producer's), {@code linger.ms=0}. Kafka's Java client 4.x ends a transaction with
 * {@code EndTxn} version 5 when the broker finalizes {@code transaction.version} 2 (KIP-890 part 2).
 *
 * <p>Options after the positional arguments, for the late write ({@code lab.lessons.late_write}):
 * {@code --partition P} sends every record to partition P; {@code --late-index K} marks transaction K's values
 * {@code "late":true} (the others {@code "late":false}); {@code --open-index K --release-file F} prints
 * {@code {"op": "open", "index": K}} once transaction K's sends succeeded, and commits it only once file F exists;
 * {@code --linger-ms} and {@code --request-timeout-ms} set those settings. A transaction whose send or end fails
 * is reported with outcome {@code FAILED} and its {@code error}; the producer then stops.
 */
public final class LabTxnProducer {
    private LabTxnProducer() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = System.out;
        System.setOut(System.err); // a client's stray print never reaches the protocol
        if (args.length < 5) {
            System.err.println("usage: LabTxnProducer BOOTSTRAP TOPIC TRANSACTIONAL_ID TRANSACTIONS RECORDS "
                + "[ABORT_EVERY]");
            System.exit(2);
        }
        ObjectMapper json = new ObjectMapper();
        String topic = args[1];
        int transactions = Integer.parseInt(args[3]);
        int records = Integer.parseInt(args[4]);
        int abortEvery = args.length > 5 && !args[5].startsWith("--") ? Integer.parseInt(args[5]) : 0;
        Map<String, String> opts = new LinkedHashMap<>();
        for (int a = args.length > 5 && !args[5].startsWith("--") ? 6 : 5; a + 1 < args.length; a += 2) {
            opts.put(args[a], args[a + 1]);
        }
        Integer partition = opts.containsKey("--partition") ? Integer.valueOf(opts.get("--partition")) : null;
        int lateIndex = Integer.parseInt(opts.getOrDefault("--late-index", "-1"));
        int openIndex = Integer.parseInt(opts.getOrDefault("--open-index", "-1"));
        Path release = opts.containsKey("--release-file") ? Paths.get(opts.get("--release-file")) : null;
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("transactional.id", args[2]);
        props.put("client.id", "lab-txn-producer");
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("linger.ms", opts.getOrDefault("--linger-ms", "0"));
        if (opts.containsKey("--request-timeout-ms")) {
            props.put("request.timeout.ms", opts.get("--request-timeout-ms"));
        }
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int i = 0; i < transactions; i++) {
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("op", "transaction");
                line.put("index", i);
                line.put("records", records);
                Map<String, long[]> offsets = new TreeMap<>();
                String failed = null;
                boolean abort = false;
                try {
                    producer.beginTransaction();
                    List<Future<RecordMetadata>> sends = new ArrayList<>();
                    for (int j = 0; j < records; j++) {
                        String key = String.format("k%02d", j % 8);
                        String value = "{\"transaction\":" + i + ",\"record\":" + j + ",\"late\":"
                            + (i == lateIndex) + "}";
                        sends.add(producer.send(new ProducerRecord<>(topic, partition, key, value)));
                    }
                    producer.flush();
                    for (Future<RecordMetadata> f : sends) {
                        try {
                            RecordMetadata m = f.get();
                            long[] range = offsets.computeIfAbsent(String.valueOf(m.partition()),
                                p -> new long[] {m.offset(), m.offset()});
                            range[0] = Math.min(range[0], m.offset());
                            range[1] = Math.max(range[1], m.offset());
                        } catch (Exception e) {
                            failed = String.valueOf(e.getCause() != null ? e.getCause() : e);
                        }
                    }
                    abort = failed != null || (abortEvery > 0 && (i + 1) % abortEvery == 0);
                    if (i == openIndex && !abort && release != null) {
                        Map<String, Object> open = new LinkedHashMap<>();
                        open.put("op", "open");
                        open.put("index", i);
                        out.println(json.writeValueAsString(open));
                        out.flush();
                        long deadline = System.currentTimeMillis() + 120_000L;
                        while (!Files.exists(release) && System.currentTimeMillis() < deadline) {
                            Thread.sleep(50);
                        }
                    }
                    if (abort) {
                        producer.abortTransaction();
                    } else {
                        producer.commitTransaction();
                    }
                    line.put("outcome", abort ? "ABORT" : "COMMIT");
                } catch (Exception e) {
                    line.put("outcome", "FAILED");
                    line.put("error", String.valueOf(e));
                }
                line.put("offsets", offsets);
                if (failed != null) {
                    line.put("failed_send", failed);
                }
                out.println(json.writeValueAsString(line));
                out.flush();
                if ("FAILED".equals(line.get("outcome"))) {
                    break;
                }
            }
        }
        Map<String, Object> done = new LinkedHashMap<>();
        done.put("op", "done");
        done.put("client", "kafka-clients " + AppInfoParser.getVersion());
        out.println(json.writeValueAsString(done));
        out.flush();
    }
}
