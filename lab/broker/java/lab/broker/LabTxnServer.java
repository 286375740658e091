package lab.broker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Kafka's own Java producer, driven one call at a time by a Python process ({@code lab.broker.java_producer}): the
 * kafka-eos driver's transactional producer with {@code --txn-client java}.
 *
 * <p>Usage: {@code LabTxnServer NAME=VALUE ...}, the producer's settings (every one that decides delivery is given by
 * the caller; the serializers are byte arrays). Then one JSON request per line on standard input, each with an
 * {@code id} and an {@code op}:
 * {@code init}, {@code begin}, {@code send} ({@code topic}, {@code partition}, {@code key} and {@code value} in
 * base64, the key may be null), {@code flush}, {@code offsets} ({@code group}, {@code offsets}: partition of
 * {@code topic} to {@code [offset, metadata]}), {@code commit}, {@code abort}, {@code close}. One JSON answer per
 * request on standard output, {@code {"id", "ok": true}} or {@code {"id", "ok": false, "error": the exception's
 * simple name, "message", "retriable"}}; {@code init}'s and {@code commit}'s answers carry the client's producer id
 * and epoch as it holds them, {@code send}'s its partition and offset. A send is answered when its callback runs, so
 * its answer may come after later requests' answers; every other request is answered when its call returns, in
 * order. The first line out is {@code {"id": 0, "ok": true, "client"}}; standard input's end closes the producer.
 *
 * <p>Delivery guarantee: none of its own; the caller commits a transaction only after every send in it was
 * answered {@code ok}, as with kafka-python ({@code lab.kafka.transactions}).
 */
public final class LabTxnServer {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static PrintStream out;

    private LabTxnServer() {
    }

    public static void main(String[] args) throws Exception {
        out = System.out;
        System.setOut(System.err); // a client's stray print never reaches the protocol
        Properties props = new Properties();
        for (String a : args) {
            int eq = a.indexOf('=');
            if (eq < 1) {
                System.err.println("usage: LabTxnServer NAME=VALUE ...; not a setting: " + a);
                System.exit(2);
            }
            props.put(a.substring(0, eq), a.substring(eq + 1));
        }
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        ObjectNode hello = JSON.createObjectNode();
        hello.put("id", 0);
        hello.put("ok", true);
        hello.put("client", "kafka-clients " + AppInfoParser.getVersion());
        answer(hello);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Base64.Decoder b64 = Base64.getDecoder();
        try {
            String line;
            while ((line = in.readLine()) != null) {
                JsonNode req = JSON.readTree(line);
                long id = req.get("id").asLong();
                String op = req.get("op").asText();
                ObjectNode reply = JSON.createObjectNode();
                reply.put("id", id);
                try {
                    switch (op) {
                        case "init":
                            producer.initTransactions();
                            putEpoch(reply, producer);
                            break;
                        case "begin":
                            producer.beginTransaction();
                            break;
                        case "send":
                            byte[] key = req.get("key").isNull() ? null : b64.decode(req.get("key").asText());
                            byte[] value = b64.decode(req.get("value").asText());
                            ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(req.get("topic").asText(),
                                req.get("partition").asInt(), key, value);
                            producer.send(record, (meta, error) -> {
                                ObjectNode ack = JSON.createObjectNode();
                                ack.put("id", id);
                                if (error != null) {
                                    putError(ack, error);
                                } else {
                                    ack.put("ok", true);
                                    ack.put("partition", meta.partition());
                                    ack.put("offset", meta.offset());
                                }
                                answer(ack);
                            });
                            continue; // answered by the callback
                        case "flush":
                            producer.flush();
                            break;
                        case "offsets":
                            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                            String topic = req.get("topic").asText();
                            Iterator<Map.Entry<String, JsonNode>> it = req.get("offsets").fields();
                            while (it.hasNext()) {
                                Map.Entry<String, JsonNode> e = it.next();
                                offsets.put(new TopicPartition(topic, Integer.parseInt(e.getKey())),
                                    new OffsetAndMetadata(e.getValue().get(0).asLong(), e.getValue().get(1).asText()));
                            }
                            producer.sendOffsetsToTransaction(offsets,
                                new ConsumerGroupMetadata(req.get("group").asText()));
                            break;
                        case "commit":
                            producer.commitTransaction();
                            putEpoch(reply, producer);
                            break;
                        case "abort":
                            producer.abortTransaction();
                            break;
                        case "close":
                            producer.close(Duration.ofSeconds(5));
                            reply.put("ok", true);
                            answer(reply);
                            return;
                        default:
                            throw new IllegalArgumentException("unknown op " + op);
                    }
                    reply.put("ok", true);
                } catch (Exception e) {
                    putError(reply, e);
                }
                answer(reply);
            }
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
    }

    private static void putError(ObjectNode reply, Throwable e) {
        Throwable cause = e instanceof org.apache.kafka.common.KafkaException || e.getCause() == null ? e : e.getCause();
        reply.put("ok", false);
        reply.put("error", cause.getClass().getSimpleName());
        Throwable why = cause.getCause();
        reply.put("message", String.valueOf(cause.getMessage())
            + (why == null ? "" : "; caused by " + why.getClass().getSimpleName() + ": " + why.getMessage()));
        reply.put("retriable", cause instanceof RetriableException);
    }

    /** The producer id and epoch the client holds: read from its transaction manager, which no public API shows. */
    private static void putEpoch(ObjectNode reply, KafkaProducer<byte[], byte[]> producer) {
        try {
            Field tm = KafkaProducer.class.getDeclaredField("transactionManager");
            tm.setAccessible(true);
            Object manager = tm.get(producer);
            Field pe = manager.getClass().getDeclaredField("producerIdAndEpoch");
            pe.setAccessible(true);
            Object idAndEpoch = pe.get(manager);
            reply.put("producer_id", idAndEpoch.getClass().getField("producerId").getLong(idAndEpoch));
            reply.put("epoch", idAndEpoch.getClass().getField("epoch").getShort(idAndEpoch));
        } catch (ReflectiveOperationException | RuntimeException e) {
            reply.putNull("producer_id");
            reply.putNull("epoch");
        }
    }

    private static synchronized void answer(ObjectNode reply) {
        try {
            out.println(JSON.writeValueAsString(reply));
            out.flush();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
