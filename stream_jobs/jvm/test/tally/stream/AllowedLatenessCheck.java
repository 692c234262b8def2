package tally.stream;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Random;
import java.util.TreeMap;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The allowed lateness, without Spark: one visitor's page views arrive out of order,
 * up to just within the 72 h allowed lateness, over ten days, in batches that push the watermark; the function is called as
 * Spark calls it (new rows, or a timeout once the watermark passes the timestamp it set). Checks:
 * no page view within the allowed lateness is counted late; the rollup deltas summed over every
 * call equal the contribution of every page view counted (what raw counts), cell by cell; the
 * newest session rows (ReplacingMergeTree: the last written per start, tombstones dropped) are the
 * sessions of those page views; and the state never holds more than the page views of the last
 * allowed lateness + 3 days, however late they arrive (pruned, though the visitor comes back every day). Then page views
 * older than the allowed lateness for a visitor with no state are counted late, and nothing else.
 * Run by tests/unit/test_visitor_state_encoding.py: exits 1 with the failed check on stderr.
 */
public final class AllowedLatenessCheck {

    private static final long GAP_MS = 1_800_000L;
    private static final long LATENESS_MS = 72 * VisitorActivity.HOUR_MS;
    private static final long WATERMARK_MS = 120_000L;
    private static final long T0 = 1_767_225_600_000L; // 2026-01-01T00:00Z
    private static final StructType INPUT = new StructType()
            .add("ts_ms", DataTypes.LongType)
            .add("is_engagement", DataTypes.BooleanType)
            .add("engagement_ms", DataTypes.LongType)
            .add("offset", DataTypes.LongType)
            .add("event_id", DataTypes.StringType)
            .add("path", DataTypes.StringType)
            .add("referrer_domain", DataTypes.StringType)
            .add("utm_source", DataTypes.StringType)
            .add("utm_medium", DataTypes.StringType)
            .add("utm_campaign", DataTypes.StringType)
            .add("country", DataTypes.StringType)
            .add("device", DataTypes.StringType)
            .add("browser", DataTypes.StringType)
            .add("os", DataTypes.StringType)
            .add("ip_hash", DataTypes.StringType)
            .add("utm_content", DataTypes.StringType)
            .add("utm_term", DataTypes.StringType)
            .add("language", DataTypes.StringType)
            .add("screen_size", DataTypes.StringType);

    private AllowedLatenessCheck() {}

    public static void main(String[] args) {
        for (long seed = 1; seed <= 40; seed++) {
            exactWithinLateness(seed);
        }
        olderThanLatenessIsLate();
        System.out.println("ok");
    }

    /** A visitor seen every day for ten days, its page views sent up to 30 h late. */
    static void exactWithinLateness(long seed) {
        Random random = new Random(seed);
        VisitorActivity function = new VisitorActivity(GAP_MS, 0L, 10_000L, LATENESS_MS);
        List<Object[]> sent = new ArrayList<>(); // (ts, arrival)
        for (int day = 0; day < 10; day++) {
            int visits = 1 + random.nextInt(3);
            for (int v = 0; v < visits; v++) {
                long start = T0 + day * VisitorActivity.DAY_MS + (long) (random.nextDouble() * VisitorActivity.DAY_MS);
                int pages = 1 + random.nextInt(4);
                long ts = start;
                for (int p = 0; p < pages; p++) {
                    ts += (long) (random.nextDouble() * 2.2 * GAP_MS); // sometimes past the gap
                    // A third sent late, up to just within the allowed lateness (the horizon lags the
                    // newest page view by the lateness and the watermark delay).
                    long delay = random.nextInt(3) == 0 ? (long) (random.nextDouble() * (LATENESS_MS - 900_000L)) : 0L;
                    sent.add(new Object[] {ts, ts + delay});
                }
            }
        }
        sent.sort((a, b) -> Long.compare((Long) a[1], (Long) b[1]));
        Harness harness = new Harness(function);
        long offset = 0;
        int i = 0;
        int maxStored = 0;
        while (i < sent.size()) {
            long arrival = (Long) sent.get(i)[1];
            List<Row> batch = new ArrayList<>();
            while (i < sent.size() && (Long) sent.get(i)[1] <= arrival + 600_000L) {
                long ts = (Long) sent.get(i)[0];
                batch.add(pageview(ts, "pv-" + offset, "/p" + (offset % 3), offset));
                offset++;
                i++;
            }
            harness.batch(batch);
            maxStored = Math.max(maxStored, harness.storedDays());
        }
        harness.advanceTo(T0 + 20 * VisitorActivity.DAY_MS);
        check(harness.lateCount == 0, "seed " + seed + ": no page view within the allowed lateness is late, got "
                + harness.lateCount);
        check(!harness.exists, "seed " + seed + ": the state is gone once the horizon passed every day");
        check(maxStored <= 7, "seed " + seed + ": the state holds at most 7 UTC days of page views, held " + maxStored);
        harness.checkExact("seed " + seed);
    }

    /** Four days late, a visitor with no state: late, counted nowhere else. */
    static void olderThanLatenessIsLate() {
        Harness harness = new Harness(new VisitorActivity(GAP_MS, 0L, 10_000L, LATENESS_MS));
        long now = T0 + 10 * VisitorActivity.DAY_MS;
        harness.watermark = now - WATERMARK_MS;
        harness.batch(List.of(pageview(now - 4 * VisitorActivity.DAY_MS, "old", "/", 0)));
        check(harness.lateCount == 1, "a page view 4 days late for a visitor with no state is late");
        check(harness.rollups.isEmpty() && harness.sessions.isEmpty(), "and changes no rollup, no session");
        harness.batch(List.of(pageview(now - 2 * VisitorActivity.DAY_MS, "recent", "/", 1)));
        check(harness.lateCount == 1 && harness.pageviews() == 1, "one 2 days late is counted");
    }

    static Row pageview(long ts, String id, String path, long offset) {
        Object[] values = new Object[INPUT.size()];
        values[0] = ts;
        values[1] = false;
        values[2] = 0L;
        values[3] = offset;
        values[4] = id;
        for (int i = 5; i < values.length; i++) {
            values[i] = "";
        }
        values[5] = path;
        values[6] = ts % 2 == 0 ? "a.example" : "b.example";
        values[10] = ts % 3 == 0 ? "DE" : "FR";
        return new GenericRowWithSchema(values, INPUT);
    }

    /** Calls the function as Spark does, for one visitor, and keeps what it wrote. */
    static final class Harness implements GroupState<VisitorActivity.State> {
        final VisitorActivity function;
        VisitorActivity.State state;
        boolean exists;
        boolean timedOut;
        long timeout = Long.MAX_VALUE;
        long watermark = 0L;
        long newest = Long.MIN_VALUE;
        long lateCount;
        final List<VisitorActivity.Event> counted = new ArrayList<>();
        final Map<String, long[]> rollups = new TreeMap<>();
        final Map<Long, Row> sessions = new TreeMap<>();

        Harness(VisitorActivity function) {
            this.function = function;
        }

        void batch(List<Row> rows) {
            fireTimeouts();
            for (Row row : rows) {
                long ts = row.<Long>getAs("ts_ms");
                counted.add(new VisitorActivity.Event(ts, row.getAs("event_id"), new String[0]));
            }
            run(rows.iterator(), false);
            for (Row row : rows) {
                newest = Math.max(newest, row.<Long>getAs("ts_ms"));
            }
            watermark = Math.max(watermark, newest - WATERMARK_MS);
        }

        void advanceTo(long moment) {
            while (exists && timeout < moment) {
                watermark = Math.max(watermark, timeout + 1);
                fireTimeouts();
            }
            watermark = Math.max(watermark, moment);
            fireTimeouts();
        }

        void fireTimeouts() {
            if (exists && timeout < watermark) {
                timeout = Long.MAX_VALUE;
                run(List.<Row>of().iterator(), true);
            }
        }

        void run(Iterator<Row> rows, boolean timeoutCall) {
            timedOut = timeoutCall;
            Iterator<Row> out = function.call("site\u001fvisitor", rows, this);
            while (out.hasNext()) {
                Row row = out.next();
                switch (row.getString(0)) {
                    case "rollup" -> {
                        String key = row.getLong(2) + "|" + row.getString(3) + "|" + row.getString(4);
                        long[] metrics = rollups.computeIfAbsent(key, k -> new long[VisitorActivity.METRICS.length]);
                        for (int m = 0; m < metrics.length; m++) {
                            metrics[m] += row.getLong(6 + m);
                        }
                    }
                    case "session" -> sessions.put(row.getLong(6 + VisitorActivity.METRICS.length + 1), row);
                    case "late" -> lateCount += row.getLong(6 + VisitorActivity.PAGEVIEWS);
                    default -> { }
                }
            }
        }

        int storedDays() {
            if (!exists) {
                return 0;
            }
            List<VisitorActivity.Event> stored = VisitorActivity.decode(state.getEvents());
            return (int) stored.stream().map(e -> VisitorActivity.floor(e.ts, VisitorActivity.DAY_MS)).distinct().count();
        }

        long pageviews() {
            long total = 0;
            for (Map.Entry<String, long[]> cell : rollups.entrySet()) {
                if (cell.getKey().endsWith("||")) {
                    total += cell.getValue()[VisitorActivity.PAGEVIEWS];
                }
            }
            return total;
        }

        /** The rollups and sessions written equal those of every page view sent (none late). */
        void checkExact(String what) {
            List<VisitorActivity.Event> all = new ArrayList<>();
            // Rebuild the page views with their fields, as the function saw them.
            for (VisitorActivity.Event event : counted) {
                Row row = pageview(event.ts, event.eventId, "", 0);
                String[] fields = new String[VisitorActivity.EVENT_FIELDS.length - 1];
                for (int f = 1; f < VisitorActivity.EVENT_FIELDS.length; f++) {
                    fields[f - 1] = row.getAs(VisitorActivity.EVENT_FIELDS[f]);
                }
                long offset = Long.parseLong(event.eventId.substring(3));
                fields[VisitorActivity.fieldIndex("path")] = "/p" + (offset % 3);
                all.add(new VisitorActivity.Event(event.ts, event.eventId, fields));
            }
            all.sort(VisitorActivity.EVENT_ORDER);
            List<VisitorActivity.Session> expectedSessions = function.sessions(all, List.of());
            Map<VisitorActivity.Cell, long[]> expected = function.contribution(all, expectedSessions);
            Map<String, long[]> want = new TreeMap<>();
            for (Map.Entry<VisitorActivity.Cell, long[]> cell : expected.entrySet()) {
                VisitorActivity.Cell c = cell.getKey();
                want.put(c.minute() + "|" + c.dimension() + "|" + c.value(), cell.getValue());
            }
            Map<String, long[]> got = new TreeMap<>();
            for (Map.Entry<String, long[]> cell : rollups.entrySet()) {
                if (Arrays.stream(cell.getValue()).anyMatch(m -> m != 0)) {
                    got.put(cell.getKey(), cell.getValue());
                }
            }
            check(want.keySet().equals(got.keySet()), what + ": the same rollup cells as raw");
            for (String key : want.keySet()) {
                check(Arrays.equals(want.get(key), got.get(key)),
                        what + ": cell " + key + " raw " + Arrays.toString(want.get(key)) + " agg "
                                + Arrays.toString(got.get(key)));
            }
            Map<Long, long[]> sessionsWant = new HashMap<>();
            for (VisitorActivity.Session s : expectedSessions) {
                sessionsWant.put(s.first.ts, new long[] {s.last.ts, s.pageviews});
            }
            Map<Long, long[]> sessionsGot = new HashMap<>();
            int base = 6 + VisitorActivity.METRICS.length;
            for (Row row : sessions.values()) {
                boolean deleted = row.getInt(row.length() - 1) == 1;
                if (!deleted) {
                    sessionsGot.put(row.getLong(base + 1), new long[] {row.getLong(base + 2), row.getLong(base + 3)});
                }
            }
            check(sessionsWant.keySet().equals(sessionsGot.keySet()), what + ": the same sessions as raw");
            for (Long start : sessionsWant.keySet()) {
                check(Arrays.equals(sessionsWant.get(start), sessionsGot.get(start)), what + ": session at " + start);
            }
        }

        @Override public boolean exists() { return exists; }
        @Override public VisitorActivity.State get() {
            if (!exists) {
                throw new NoSuchElementException();
            }
            return state;
        }
        @Override public scala.Option<VisitorActivity.State> getOption() { return scala.Option.apply(exists ? state : null); }
        @Override public void update(VisitorActivity.State s) { state = s; exists = true; }
        @Override public void remove() { state = null; exists = false; timeout = Long.MAX_VALUE; }
        @Override public boolean hasTimedOut() { return timedOut; }
        @Override public void setTimeoutDuration(long ms) { throw new UnsupportedOperationException(); }
        @Override public void setTimeoutDuration(String d) { throw new UnsupportedOperationException(); }
        @Override public void setTimeoutTimestamp(long ts) { timeout = ts; }
        @Override public void setTimeoutTimestamp(long ts, String d) { throw new UnsupportedOperationException(); }
        @Override public void setTimeoutTimestamp(java.sql.Date d) { throw new UnsupportedOperationException(); }
        @Override public void setTimeoutTimestamp(java.sql.Date d, String s) { throw new UnsupportedOperationException(); }
        @Override public long getCurrentWatermarkMs() { return watermark; }
        @Override public long getCurrentProcessingTimeMs() { return 0L; }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            System.err.println("failed: " + what);
            System.exit(1);
        }
    }
}
