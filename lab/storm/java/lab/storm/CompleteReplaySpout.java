package lab.storm;

import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.storm.kafka.spout.trident.KafkaTridentSpoutBatchMetadata;
import org.apache.storm.kafka.spout.trident.KafkaTridentSpoutTopicPartition;
import org.apache.storm.kafka.spout.trident.KafkaTridentSpoutTransactional;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.trident.operation.TridentCollector;
import org.apache.storm.trident.spout.IPartitionedTridentSpout;
import org.apache.storm.trident.topology.TransactionAttempt;
import org.apache.storm.trident.topology.state.RotatingTransactionalState;
import org.apache.storm.trident.topology.state.TransactionalState;
import org.apache.storm.tuple.Fields;

/**
 * KafkaTridentSpoutTransactional, with the offsets of a txid whose attempt was killed while Trident stored
 * them completed before the topology replays it.
 *
 * <p>Trident stores a new batch's offsets one partition at a time (PartitionedTridentSpoutExecutor writes a
 * ZooKeeper node per partition after the batch is emitted). A kill between two of those writes leaves the txid
 * with offsets for some partitions only. Every later topology replays that txid and hands the Kafka emitter a
 * null for the others: its NullPointerException kills the worker, and each restart dies the same way
 * (measured: 1 crash in 12, and once in the test suite). Leaving such a partition out of the replay is not
 * enough: once the txid succeeds, Trident deletes every older txid's offsets, the partition has none left, and
 * its next batch starts again from offset 0 (measured: 334 duplicates).
 *
 * <p>So before the executor reads that state (it creates its emitter first), the emitter of this spout writes,
 * for each partition missing from the newest txid, an empty batch that ends where the partition's previous
 * batch ended: first = previous last + 1, last = previous last. Its replay emits nothing (the first record
 * polled is past its end) and the next batch starts after it. The txid was never committed (its commit follows
 * the emit), so replaying nothing from those partitions, and their records in the next txid, is exactly once.
 *
 * <p>And its emitter replays a txid's whole range ({@link CompleteReplayEmitter}).
 */
public final class CompleteReplaySpout implements
        IPartitionedTridentSpout<List<Map<String, Object>>, KafkaTridentSpoutTopicPartition, Map<String, Object>> {
    private static final long serialVersionUID = 1L;
    private final KafkaTridentSpoutTransactional<String, String> spout;
    private final String stream;

    CompleteReplaySpout(String stream, KafkaTridentSpoutTransactional<String, String> spout) {
        this.stream = stream;
        this.spout = spout;
    }

    @Override
    public Coordinator<List<Map<String, Object>>> getCoordinator(Map<String, Object> conf, TopologyContext context) {
        return spout.getCoordinator(conf, context);
    }

    @Override
    public Emitter<List<Map<String, Object>>, KafkaTridentSpoutTopicPartition, Map<String, Object>> getEmitter(
            Map<String, Object> conf, TopologyContext context) {
        completeNewestTxid(conf);
        return new CompleteReplayEmitter(spout.getEmitter(conf, context));
    }

    /** The repair described above, on the state PartitionedTridentSpoutExecutor.Emitter is about to read. */
    @SuppressWarnings("unchecked")
    private void completeNewestTxid(Map<String, Object> conf) {
        TransactionalState state = TransactionalState.newUserState(conf, stream);
        try {
            Map<String, RotatingTransactionalState> partitions = new LinkedHashMap<>();
            long newest = -1;
            for (String partition : state.list("")) {
                RotatingTransactionalState offsets = new RotatingTransactionalState(state, partition);
                partitions.put(partition, offsets);
                for (String txid : state.list(partition)) {
                    newest = Math.max(newest, Long.parseLong(txid));
                }
            }
            for (Map.Entry<String, RotatingTransactionalState> entry : partitions.entrySet()) {
                RotatingTransactionalState offsets = entry.getValue();
                if (newest < 0 || offsets.hasCache(newest)) {
                    continue;
                }
                Map<String, Object> before = (Map<String, Object>) offsets.getPreviousState(newest);
                // No batch before it: the partition's first, so it starts again at offset 0 (the run's topic is new).
                long last = before == null ? -1 : KafkaTridentSpoutBatchMetadata.fromMap(before).getLastOffset();
                String topology = before == null ? "" : KafkaTridentSpoutBatchMetadata.fromMap(before).getTopologyId();
                offsets.overrideState(newest, new KafkaTridentSpoutBatchMetadata(last + 1, last, topology).toMap());
                Map<String, Object> gap = new LinkedHashMap<>();
                gap.put("op", "replay-gap");
                gap.put("txid", newest);
                gap.put("partition", entry.getKey());
                gap.put("resumes_at", last + 1);
                LabTopology.Bridge.say(gap);
            }
            System.err.println("INFO  lab.storm.LabTopology - Trident offsets checked: " + partitions.size()
                    + " partitions, newest txid " + newest);
        } finally {
            state.close();
        }
    }

    @Override
    public Map<String, Object> getComponentConfiguration() {
        return spout.getComponentConfiguration();
    }

    @Override
    public Fields getOutputFields() {
        return spout.getOutputFields();
    }
}

/**
 * The Kafka emitter, with a replayed txid's batch made the one its first attempt emitted.
 *
 * <p>KafkaTridentSpoutEmitter.reEmitPartitionBatch seeks to the batch's first offset and polls once: whatever
 * that poll returns is the replay. A restarted topology's first poll can come back empty or short (its
 * consumer is still connecting), and the records it missed are never emitted again although the txid then
 * commits: measured, a crash at mid-output lost 44 and 45 events of 3,000 with a 200 ms poll, and with a 2 s
 * poll a loaded machine's replay of txid 4 still left out one partition's 44 records (the sink had them from
 * the first attempt, so that run stayed exactly once). So each replay polls again from the offset after the
 * last one it emitted, until it has emitted the batch's last offset, and says how many polls it took
 * ({@code replay-repoll}). The last offset is a record the first attempt emitted, so it is there to read
 * again (a committed record stays committed; the lab's topics are not compacted). After
 * {@link #REPLAY_POLLS} polls without it the replay fails: the worker dies and the restart replays the txid
 * again, rather than a txid committing without its records.
 *
 * <p>A new batch that found nothing in a partition is stored by Storm as first = last = the offset before the
 * consumer's position, which is the previous batch's last record, and its replay emits that record again
 * (measured: a replayed txid with two such partitions wrote 2 events twice). Such a batch is stored here as
 * the empty range first = position, last = position - 1, as CompleteReplaySpout stores a missing one: its
 * replay emits nothing, and the next batch still starts at last + 1.
 */
final class CompleteReplayEmitter implements
        IPartitionedTridentSpout.Emitter<List<Map<String, Object>>, KafkaTridentSpoutTopicPartition, Map<String, Object>> {
    /** Polls of one replayed batch before it fails (each waits up to the spout's poll timeout, 2 s). */
    static final int REPLAY_POLLS = 30;
    private final IPartitionedTridentSpout.Emitter<List<Map<String, Object>>, KafkaTridentSpoutTopicPartition,
            Map<String, Object>> emitter;

    CompleteReplayEmitter(IPartitionedTridentSpout.Emitter<List<Map<String, Object>>,
            KafkaTridentSpoutTopicPartition, Map<String, Object>> emitter) {
        this.emitter = emitter;
    }

    @Override
    public List<KafkaTridentSpoutTopicPartition> getOrderedPartitions(List<Map<String, Object>> allPartitionInfo) {
        return emitter.getOrderedPartitions(allPartitionInfo);
    }

    @Override
    public List<KafkaTridentSpoutTopicPartition> getPartitionsForTask(int taskId, int numTasks,
            List<KafkaTridentSpoutTopicPartition> allPartitionInfoSorted) {
        return emitter.getPartitionsForTask(taskId, numTasks, allPartitionInfoSorted);
    }

    @Override
    public Map<KafkaTridentSpoutTopicPartition, Map<String, Object>> emitBatchNew(TransactionAttempt tx,
            TridentCollector collector, Set<KafkaTridentSpoutTopicPartition> partitions,
            Map<KafkaTridentSpoutTopicPartition, Map<String, Object>> lastPartitionMetas) {
        Emitted emitted = new Emitted(collector);
        Map<KafkaTridentSpoutTopicPartition, Map<String, Object>> metas =
                emitter.emitBatchNew(tx, emitted, partitions, lastPartitionMetas);
        for (Map.Entry<KafkaTridentSpoutTopicPartition, Map<String, Object>> entry : metas.entrySet()) {
            if (!emitted.highest.containsKey(entry.getKey().getTopicPartition().partition())) {
                KafkaTridentSpoutBatchMetadata batch = KafkaTridentSpoutBatchMetadata.fromMap(entry.getValue());
                long last = batch.getLastOffset();
                entry.setValue(new KafkaTridentSpoutBatchMetadata(last + 1, last, batch.getTopologyId()).toMap());
            }
        }
        return metas;
    }

    @Override
    public void reEmitPartitionBatch(TransactionAttempt tx, TridentCollector collector,
            KafkaTridentSpoutTopicPartition partition, Map<String, Object> partitionMeta) {
        KafkaTridentSpoutBatchMetadata batch = KafkaTridentSpoutBatchMetadata.fromMap(partitionMeta);
        long first = batch.getFirstOffset();
        long last = batch.getLastOffset();
        if (first > last || last < 0) {
            return;  // an empty batch: its first attempt emitted nothing here
        }
        int id = partition.getTopicPartition().partition();
        Emitted emitted = new Emitted(collector);
        Map<String, Object> rest = partitionMeta;
        int polls = 0;
        while (true) {
            emitter.reEmitPartitionBatch(tx, emitted, partition, rest);
            polls++;
            long highest = emitted.highest.getOrDefault(id, -1L);
            if (highest >= last) {
                break;
            }
            if (polls >= REPLAY_POLLS) {
                throw new IllegalStateException("Trident's replay of txid " + tx.getTransactionId() + " reached "
                        + "offset " + highest + " of " + partition.getId() + ", not its last, " + last + ", in "
                        + polls + " polls");
            }
            rest = new KafkaTridentSpoutBatchMetadata(Math.max(first, highest + 1), last,
                    batch.getTopologyId()).toMap();
        }
        if (polls > 1) {
            Map<String, Object> repoll = new LinkedHashMap<>();
            repoll.put("op", "replay-repoll");
            repoll.put("txid", tx.getTransactionId());
            repoll.put("partition", partition.getId());
            repoll.put("polls", polls);
            repoll.put("offsets", Arrays.asList(first, last));
            LabTopology.Bridge.say(repoll);
        }
    }

    @Override
    public void refreshPartitions(List<KafkaTridentSpoutTopicPartition> partitionResponsibilities) {
        emitter.refreshPartitions(partitionResponsibilities);
    }

    @Override
    public void close() {
        emitter.close();
    }
}

/** A collector that passes each tuple on and keeps, per Kafka partition, the highest offset among them (RECORD's
 * first two fields). */
final class Emitted implements TridentCollector {
    private final TridentCollector collector;
    final Map<Integer, Long> highest = new HashMap<>();

    Emitted(TridentCollector collector) {
        this.collector = collector;
    }

    @Override
    public void emit(List<Object> values) {
        highest.merge(((Number) values.get(0)).intValue(), ((Number) values.get(1)).longValue(), Math::max);
        collector.emit(values);
    }

    @Override
    public void flush() {
        collector.flush();
    }

    @Override
    public void reportError(Throwable t) {
        collector.reportError(t);
    }
}
