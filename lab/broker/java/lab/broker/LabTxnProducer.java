package lab.broker;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintStream;
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
        int abortEvery = args.length > 5 ? Integer.parseInt(args[5]) : 0;
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("transactional.id", args[2]);
        props.put("client.id", "lab-txn-producer");
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("linger.ms", "0");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int i = 0; i < transactions; i++) {
                producer.beginTransaction();
                List<Future<RecordMetadata>> sends = new ArrayList<>();
                for (int j = 0; j < records; j++) {
                    String key = String.format("k%02d", j % 8);
                    sends.add(producer.send(new ProducerRecord<>(topic, key,
                        "{\"transaction\":" + i + ",\"record\":" + j + "}")));
                }
                producer.flush();
                Map<String, long[]> offsets = new TreeMap<>();
                String failed = null;
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
                boolean abort = failed != null || (abortEvery > 0 && (i + 1) % abortEvery == 0);
                if (abort) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("op", "transaction");
                line.put("index", i);
                line.put("outcome", abort ? "ABORT" : "COMMIT");
                line.put("records", records);
                line.put("offsets", offsets);
                if (failed != null) {
                    line.put("failed_send", failed);
                }
                out.println(json.writeValueAsString(line));
                out.flush();
            }
        }
        Map<String, Object> done = new LinkedHashMap<>();
        done.put("op", "done");
        done.put("client", "kafka-clients " + AppInfoParser.getVersion());
        out.println(json.writeValueAsString(done));
        out.flush();
    }
}
