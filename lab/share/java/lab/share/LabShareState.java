package lab.share;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintStream;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * A share group's start offsets (KIP-932's share-partition start offset), as the group's coordinator has them.
 *
 * <p>Usage: {@code LabShareState BOOTSTRAP GROUP [INTERVAL_MS]}. Writes one {@code @lab} JSON line on standard
 * output, {@code {"op": "state", "start": {...}, "lag": {...}, "end": {...}}} (per partition: the group's start
 * offset, its lag and the partition's end offset), then, with an interval, one more every interval until it is
 * killed. The lag (KIP-1226) counts the records between the start offset and the end that are not yet in a final
 * state, acknowledged (accepted or rejected) or archived (delivered the group's limit of times): 0 when the group
 * is done with the partition. Measured on Kafka 4.4.0: after every record was accepted and committed the start
 * offset stayed hundreds of records behind the end while the lag was 0. A partition the group has not read yet
 * is absent. confluent-kafka's AdminClient has no share-group offsets; Kafka's own Admin does
 * ({@code listShareGroupOffsets}).
 */
public final class LabShareState {
    private LabShareState() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = System.out;
        System.setOut(System.err); // a client's stray print never reaches the protocol
        ObjectMapper json = new ObjectMapper();
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("client.id", "lab-share-state");
        String group = args[1];
        long interval = args.length > 2 ? Long.parseLong(args[2]) : 0;
        try (Admin admin = Admin.create(props)) {
            while (true) {
                try {
                    Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                        .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                        .partitionsToOffsetInfo(group).get();
                    Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                    for (TopicPartition tp : offsets.keySet()) {
                        latest.put(tp, OffsetSpec.latest());
                    }
                    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends =
                        admin.listOffsets(latest).all().get();
                    Map<String, Long> start = new TreeMap<>();
                    Map<String, Long> lag = new TreeMap<>();
                    Map<String, Long> end = new TreeMap<>();
                    for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet()) {
                        if (e.getValue() != null) {
                            String p = String.valueOf(e.getKey().partition());
                            start.put(p, e.getValue().startOffset());
                            e.getValue().lag().ifPresent(l -> lag.put(p, l));
                            end.put(p, ends.get(e.getKey()).offset());
                        }
                    }
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("op", "state");
                    m.put("start", start);
                    m.put("lag", lag);
                    m.put("end", end);
                    out.println("@lab " + json.writeValueAsString(m));
                    out.flush();
                } catch (Exception e) {
                    if (interval == 0) {
                        throw e;
                    }
                    // the broker away (a broker fault): the next interval asks again
                }
                if (interval == 0) {
                    return;
                }
                Thread.sleep(interval);
            }
        }
    }
}
