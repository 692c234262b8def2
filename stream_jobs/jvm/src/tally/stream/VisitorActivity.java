package tally.stream;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;

import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * One visitor's page views → exact sessions and signed deltas of the rollups.
 *
 * <p>Spark's arbitrary stateful processing keyed by (site, visitor_id). The state keeps the
 * visitor's accepted page views until none of them can change a number any more (every session
 * closed, every UTC day they fall in closed by the watermark). On each call the visitor's
 * contribution to the rollups is computed from all of its page views, before and after the new
 * ones, and only the difference is emitted: a session that grows retracts its old bounce, exit
 * page and duration and adds the new ones; a late page view that bridges two sessions retracts
 * both and adds the merged one. Summed over visitors (stream_jobs/activity.py) the deltas are
 * the rollup rows; summed over batches (SummingMergeTree) they are the totals. The definitions
 * are those of storage/queries (and of storage/rollup_backfill.py, which builds the same rows in
 * SQL): a session is a run of page views whose gaps are all ≤ gap; ties on ts go to the smaller
 * event_id; a visitor is a distinct (UTC day, visitor_id).
 *
 * <p>Lateness is decided here, not by Spark. Spark drops every row behind its watermark before a
 * stateful function sees it, so the query gives Spark a watermark delay far longer than any
 * lateness that matters (stream_jobs/activity.py, SPARK_WATERMARK_DELAY_S), and this function
 * works with the real one: watermark = Spark's + watermarkShiftMs (= Spark's delay −
 * TALLY_WATERMARK_S). Timeouts are Spark's event-time timeouts, shifted the same way: a visitor is
 * looked at again exactly when the watermark may close one of its sessions (for the live views:
 * is_closed) or the lateness horizon may end everything of it, in a live run and in a replay alike.
 *
 * <p>Allowed lateness: the lateness horizon is the watermark − allowedLatenessMs
 * (TALLY_ALLOWED_LATENESS_S, 72 h by default). The state keeps a visitor's page views until the
 * horizon has passed the end of their sessions (last page view + gap) and of their UTC days, so a
 * page view after the horizon is always counted exactly, whoever sent it: it opens, extends or
 * merges sessions (their rows replaced, tombstones for starts that moved) and moves every rollup
 * by the difference. What the horizon has made final is pruned from the state (pruned()), so a
 * visitor seen every day holds a few days of page views, not all of them: the state holds the
 * visitors of the last allowed lateness + 1 day, 3 to 4 days by default. A page view at or behind
 * the horizon is late if it would change a number already final: its UTC day has ended behind the
 * horizon, it falls within the gap of a session the horizon has closed (or of one pruned), or this
 * visitor has no state (nothing proves it changes nothing final). A late page view is counted in
 * a "late" row and changes nothing else (the query layer answers its days from the archive:
 * storage/queries/contract.py). Any other page view behind the watermark is counted as usual: the
 * rollups take deltas, so a minute is never "closed". The
 * rate-limit panes count only page views ahead of the watermark (the present).
 *
 * <p>Each event counts once. A sender that lost a 202 sends the event again with the
 * same event_id, so the log may hold it twice, at different offsets and, for a browser event (ts =
 * receive time), at different times. The raw archive keeps the first copy (lowest offset); so does
 * this function: the page views of a call are taken in log order (Kafka offset; a visitor's
 * messages share one partition), and one whose event_id the state already holds, or that came
 * earlier in the call, is dropped before anything else: it counts in no rollup, session, pane or
 * late row. The state keeps every accepted page view (and so its event_id) as long as anything of
 * the visitor can change: until the lateness horizon passes the end of the UTC day of its last
 * page view (pruned() drops it no sooner than the horizon passes its own day). Limits: a copy
 * arriving after that (the day of the original closed by the horizon; a browser copy received on a
 * later day has another visitor key, see below) is behind the horizon, hence late: reported in
 * late_events, as any late page view, though the archive drops it. A late page view is
 * not kept, so its copy in a later call is judged again. A copy under another visitor key (another
 * client IP or user agent, or the daily salt rotated between the two sends: a retry across
 * midnight UTC) is another group and cannot be recognised here: the archive drops it, the rollups
 * count it. Deduplicating that too would need state by event_id over the whole retention, which
 * Spark would scan on every batch.
 *
 * <p>Engagement events never count as page views: they start, extend or split no
 * session and count in no page view, visitor, pane or duration. Each belongs to the session whose
 * [first page view, last page view + gap] holds its ts (storage/queries/contract.py, "engaged
 * session"); a session's engaged time is the sum of their engagement_ms, and a one-page-view
 * session with at least engagedBounceMs of it is no bounce. The state keeps them (deduplicated by
 * event_id like page views) as long as the visitor's page views, and at least until the watermark
 * passes the newest of them: a page view arriving later may still claim one. One at or behind the
 * lateness horizon is late if the visitor has no page view in the state or if it falls in a closed
 * (or pruned) session: counted in a "late" row, it changes nothing else.
 *
 * <p>Output rows, by {@code kind}: "rollup" (site, bucket = minute, dimension, value, metrics),
 * "session" (a session's newest version, or a tombstone for a session whose start moved),
 * "pane" (page views per ip_hash and minute, for the rate limits), "late" (late page views per
 * site and minute). Deterministic for a given state and input, so a re-run batch writes the same
 * rows (the sink deduplicates them by batch).
 */
public final class VisitorActivity
        implements FlatMapGroupsWithStateFunction<String, Row, VisitorActivity.State, Row> {

    private static final long serialVersionUID = 1L;

    static final long MINUTE_MS = 60_000L;
    static final long HOUR_MS = 3_600_000L;
    static final long DAY_MS = 86_400_000L;

    // Metric positions in a rollup cell (the columns of migration 0020, in its order).
    static final int PAGEVIEWS = 0;
    static final int VISITORS = 1;
    static final int HOUR_FIRST_VISITORS = 2;
    static final int DAY_FIRST_VISITORS = 3;
    static final int DAY_LAST_VISITORS = 4;
    static final int SESSIONS = 5;
    static final int BOUNCES = 6;
    static final int DURATION_MS = 7;
    static final String[] METRICS = {
        "pageviews", "visitors", "hour_first_visitors", "day_first_visitors",
        "day_last_visitors", "sessions", "bounces", "duration_ms",
    };

    static final String TOTAL = "";
    static final String[] EVENT_DIMENSIONS = {"path", "country", "browser", "os", "device", "language", "screen_size"};
    /** Properties of a session: entry_path / exit_path are its first / last path, the rest its first page view's. */
    static final String[] SESSION_DIMENSIONS = {
        "entry_path", "exit_path", "referrer_domain", "utm_source", "utm_medium", "utm_campaign",
        "utm_content", "utm_term",
    };

    /**
     * A session row's attributes taken from its first page view, in the output's order, after
     * entry_path and exit_path (stream_jobs/activity.py SESSION_ATTRIBUTES: the `sessions`
     * columns). utm_content to language came with migration 0062; the state has held their
     * fields since encoding v2, so its encoding did not change.
     */
    static final String[] SESSION_ROW_FIELDS = {
        "referrer_domain", "utm_source", "utm_medium", "utm_campaign", "country", "device", "browser", "os",
        "utm_content", "utm_term", "screen_size", "language",
    };

    /**
     * The page view fields the function reads (besides ts_ms and the Kafka offset), in this order.
     * screen_size is the class of the screen width, computed by the query (stream_jobs/activity.py).
     */
    static final String[] EVENT_FIELDS = {
        "event_id", "path", "referrer_domain", "utm_source", "utm_medium", "utm_campaign",
        "country", "device", "browser", "os", "ip_hash", "utm_content", "utm_term", "language", "screen_size",
    };

    /**
     * The fields of a state of encoding v1 (no version marker), in their order:
     * running deployments restore such states from their checkpoints.
     */
    static final String[] V1_EVENT_FIELDS = {
        "event_id", "path", "referrer_domain", "utm_source", "utm_medium", "utm_campaign",
        "country", "device", "browser", "os", "ip_hash",
    };

    /**
     * The leading int of an encoding v2 state; v1 states begin with their page view count (≥ 0),
     * so a negative marker tells them apart without a checkpoint reset.
     */
    static final int ENCODING_V2 = -2;
    /**
     * Encoding v3 (engaged sessions): v2's page views, then the engagement events. v1
     * and v2 states (none) still decode, with no engagement event.
     */
    static final int ENCODING_V3 = -3;
    /**
     * Encoding v4 (allowed lateness): the moment up to which the numbers of page views
     * pruned from the state are final (finalThrough), then v3's body. v1 to v3 states decode with
     * nothing pruned.
     */
    static final int ENCODING_V4 = -4;

    public static final StructType OUTPUT = outputSchema();

    private final long gapMs;
    private final long watermarkShiftMs;
    private final long engagedBounceMs;
    private final long allowedLatenessMs;

    public VisitorActivity(long gapMs, long watermarkShiftMs, long engagedBounceMs, long allowedLatenessMs) {
        this.gapMs = gapMs;
        this.watermarkShiftMs = watermarkShiftMs;
        this.engagedBounceMs = engagedBounceMs;
        this.allowedLatenessMs = allowedLatenessMs;
    }

    /**
     * The streaming plan: page views and engagement events (with a watermark on ts; the column
     * is_engagement tells them apart) → activity rows. Called from Python
     * (stream_jobs/activity.py) through Py4J.
     */
    public static Dataset<Row> apply(
            Dataset<Row> events, long gapMs, long watermarkShiftMs, long engagedBounceMs, long allowedLatenessMs) {
        return events
                .groupByKey((MapFunction<Row, String>) VisitorActivity::key, Encoders.STRING())
                .flatMapGroupsWithState(
                        new VisitorActivity(gapMs, watermarkShiftMs, engagedBounceMs, allowedLatenessMs),
                        OutputMode.Update(),
                        Encoders.bean(State.class),
                        Encoders.row(OUTPUT),
                        GroupStateTimeout.EventTimeTimeout());
    }

    static String key(Row row) {
        return row.<String>getAs("site") + "\u001f" + row.<String>getAs("visitor_id");
    }

    // --- the state ----------------------------------------------------------------------------

    /** One accepted page view, as much of it as the numbers need. */
    static final class Event {
        final long ts;
        final String eventId;
        final String[] fields; // EVENT_FIELDS after event_id, in order

        Event(long ts, String eventId, String[] fields) {
            this.ts = ts;
            this.eventId = eventId;
            this.fields = fields;
        }

        String field(String name) {
            return fields[fieldIndex(name)];
        }
    }

    /** One accepted engagement event: when, its id (for re-sent copies) and its engaged ms. */
    record Engagement(long ts, String eventId, long ms) {}

    static final Comparator<Engagement> ENGAGEMENT_ORDER =
            Comparator.comparingLong(Engagement::ts).thenComparing(Engagement::eventId);

    /**
     * What a state holds: the page views and the engagement events, each in time order, and the
     * moment up to which the numbers of the page views pruned from it are final (pruned()).
     */
    record Stored(List<Event> pageviews, List<Engagement> engagements, long finalThrough) {
        Stored(List<Event> pageviews, List<Engagement> engagements) {
            this(pageviews, engagements, Long.MIN_VALUE);
        }
    }

    /** The position of a field (not event_id) in Event.fields. */
    static int fieldIndex(String name) {
        for (int i = 1; i < EVENT_FIELDS.length; i++) {
            if (EVENT_FIELDS[i].equals(name)) {
                return i - 1;
            }
        }
        throw new IllegalArgumentException(name);
    }

    static final Comparator<Event> EVENT_ORDER =
            Comparator.comparingLong((Event e) -> e.ts).thenComparing(e -> e.eventId);

    /**
     * A visitor's page views still able to change a number, and the watermark last seen. A Java
     * bean (Spark 4.0's Kryo state encoder is not serializable) whose page views are one byte
     * array: Spark decodes every state row on each batch to find the timed-out ones, and copying
     * bytes is far cheaper than decoding a list of objects; they are parsed only when the visitor
     * is processed.
     */
    public static final class State implements Serializable {
        private static final long serialVersionUID = 1L;
        private byte[] events = new byte[0];
        private long watermarkMs = Long.MIN_VALUE;

        public State() {}

        public byte[] getEvents() {
            return events;
        }

        public void setEvents(byte[] events) {
            this.events = events;
        }

        public long getWatermarkMs() {
            return watermarkMs;
        }

        public void setWatermarkMs(long watermarkMs) {
            this.watermarkMs = watermarkMs;
        }
    }

    static byte[] encode(List<Event> events) {
        return encode(events, List.of());
    }

    static byte[] encode(List<Event> events, List<Engagement> engagements) {
        return encode(new Stored(events, engagements));
    }

    /**
     * Encoding v4: ENCODING_V4, finalThrough, the page view count, then per page view ts, event_id
     * and EVENT_FIELDS' values (as v2); then the engagement event count and per engagement event
     * ts, event_id and engaged ms (as v3).
     */
    static byte[] encode(Stored stored) {
        List<Event> events = stored.pageviews();
        List<Engagement> engagements = stored.engagements();
        try (ByteArrayOutputStream bytes = new ByteArrayOutputStream(); DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(ENCODING_V4);
            out.writeLong(stored.finalThrough());
            out.writeInt(events.size());
            for (Event event : events) {
                out.writeLong(event.ts);
                out.writeUTF(event.eventId);
                for (String field : event.fields) {
                    out.writeUTF(field);
                }
            }
            out.writeInt(engagements.size());
            for (Engagement engagement : engagements) {
                out.writeLong(engagement.ts());
                out.writeUTF(engagement.eventId());
                out.writeLong(engagement.ms());
            }
            out.flush();
            return bytes.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static List<Event> decode(byte[] encoded) {
        return decodeState(encoded).pageviews();
    }

    static Stored decodeState(byte[] encoded) {
        if (encoded == null || encoded.length == 0) {
            return new Stored(new ArrayList<>(), new ArrayList<>());
        }
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(encoded))) {
            int first = in.readInt();
            boolean v1 = first >= 0;
            if (!v1 && first != ENCODING_V2 && first != ENCODING_V3 && first != ENCODING_V4) {
                throw new IllegalStateException("unknown visitor state encoding " + first);
            }
            long finalThrough = first == ENCODING_V4 ? in.readLong() : Long.MIN_VALUE;
            int count = v1 ? first : in.readInt();
            // Where each stored value goes among EVENT_FIELDS (after event_id); fields a v1
            // state lacks stay '' (their dimensions count the value '' for those page views).
            int[] positions = new int[(v1 ? V1_EVENT_FIELDS.length : EVENT_FIELDS.length) - 1];
            for (int i = 0; i < positions.length; i++) {
                positions[i] = v1 ? fieldIndex(V1_EVENT_FIELDS[i + 1]) : i;
            }
            List<Event> events = new ArrayList<>(count);
            for (int n = 0; n < count; n++) {
                long ts = in.readLong();
                String eventId = in.readUTF();
                String[] fields = new String[EVENT_FIELDS.length - 1];
                Arrays.fill(fields, "");
                for (int position : positions) {
                    fields[position] = in.readUTF();
                }
                events.add(new Event(ts, eventId, fields));
            }
            List<Engagement> engagements = new ArrayList<>();
            if (first == ENCODING_V3 || first == ENCODING_V4) {
                int engaged = in.readInt();
                for (int n = 0; n < engaged; n++) {
                    engagements.add(new Engagement(in.readLong(), in.readUTF(), in.readLong()));
                }
            }
            return new Stored(events, engagements, finalThrough);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * A session: a run of page views whose gaps are all ≤ gap, the distinct paths they viewed (in
     * order of first view: the `paths` column, migration 0063), the paths of its page views in
     * time order with consecutive repeats folded (the `journey` column, migration 0071), and the
     * engaged ms of the engagement events belonging to it (ts in [first, last + gap]).
     */
    static final class Session {
        final Event first;
        final Event last;
        final long pageviews;
        final List<String> paths;
        final List<String> journey;
        long engagedMs;

        Session(Event first, Event last, long pageviews, List<String> paths, List<String> journey) {
            this.first = first;
            this.last = last;
            this.pageviews = pageviews;
            this.paths = paths;
            this.journey = journey;
        }

        long durationMs() {
            return last.ts - first.ts;
        }

        boolean sameAs(Session other) {
            return other != null && first == other.first && last == other.last && pageviews == other.pageviews
                    && engagedMs == other.engagedMs && paths.equals(other.paths)
                    && journey.equals(other.journey);
        }
    }

    record Cell(long minute, String dimension, String value) {}

    // --- the function -------------------------------------------------------------------------

    @Override
    public Iterator<Row> call(String key, Iterator<Row> rows, GroupState<State> group) {
        int separator = key.indexOf('\u001f');
        String site = key.substring(0, separator);
        String visitorId = key.substring(separator + 1);
        long sparkWatermark = group.getCurrentWatermarkMs();
        // Spark's watermark starts at 0 and stays there until events have pushed it forward.
        long watermark = sparkWatermark > 0 ? sparkWatermark + watermarkShiftMs : Long.MIN_VALUE;
        // The lateness horizon: a page view after it is counted exactly, whatever the visitor's
        // state; the state keeps what may still change until the horizon passes it.
        long horizon = watermark == Long.MIN_VALUE ? Long.MIN_VALUE : watermark - allowedLatenessMs;
        State state = group.exists() ? group.get() : new State();
        List<Row> out = new ArrayList<>();

        TreeMap<Long, Long> late = new TreeMap<>();
        TreeMap<String, Long> panes = new TreeMap<>();
        ArrayList<Event> added = new ArrayList<>();
        ArrayList<Engagement> addedEngagements = new ArrayList<>();
        Stored stored = decodeState(state.events);
        List<Event> before = stored.pageviews();
        List<Engagement> engagementsBefore = stored.engagements();
        long finalThrough = stored.finalThrough();
        List<Session> sessionsBefore = sessions(before, engagementsBefore);
        Set<String> seen = new HashSet<>();
        for (Event event : before) {
            seen.add(event.eventId);
        }
        for (Engagement engagement : engagementsBefore) {
            seen.add(engagement.eventId());
        }
        for (Copy copy : inLogOrder(rows)) {
            Event event = copy.event();
            if (!seen.add(event.eventId)) {
                continue; // a re-sent copy: the first (the archive's) is the one that counts
            }
            long ts = event.ts;
            if (copy.engagement()) {
                if (ts <= horizon
                        && isLateEngagement(ts, before.isEmpty(), sessionsBefore, horizon, finalThrough)) {
                    late.merge(floor(ts, MINUTE_MS), 1L, Long::sum);
                } else {
                    addedEngagements.add(new Engagement(ts, event.eventId, copy.engagementMs()));
                }
                continue; // never a page view: no pane, no page view of any rollup
            }
            if (ts <= horizon && isLate(ts, before.isEmpty(), sessionsBefore, horizon, finalThrough)) {
                late.merge(floor(ts, MINUTE_MS), 1L, Long::sum);
                continue;
            }
            added.add(event);
            if (ts > watermark) {
                panes.merge(event.field("ip_hash") + "\u001f" + floor(ts, MINUTE_MS), 1L, Long::sum);
            }
        }

        ArrayList<Event> after = new ArrayList<>(before);
        after.addAll(added);
        Collections.sort(after, EVENT_ORDER);
        ArrayList<Engagement> engagementsAfter = new ArrayList<>(engagementsBefore);
        engagementsAfter.addAll(addedEngagements);
        Collections.sort(engagementsAfter, ENGAGEMENT_ORDER);

        List<Session> sessionsAfter = sessions(after, engagementsAfter);
        if (!added.isEmpty() || !addedEngagements.isEmpty()) {
            emitRollupDeltas(site, contribution(before, sessionsBefore), contribution(after, sessionsAfter), out);
        }
        emitSessionChanges(site, visitorId, sessionsBefore, state.watermarkMs, sessionsAfter, watermark, out);
        for (Map.Entry<String, Long> pane : panes.entrySet()) {
            String[] parts = pane.getKey().split("\u001f", -1);
            out.add(pane(site, parts[0], Long.parseLong(parts[1]), pane.getValue()));
        }
        for (Map.Entry<Long, Long> minute : late.entrySet()) {
            out.add(late(site, minute.getKey(), minute.getValue()));
        }

        long finalAt = finalAt(after, engagementsAfter);
        boolean kept = !after.isEmpty() || !engagementsAfter.isEmpty();
        if (kept && finalAt > horizon) {
            Stored remaining = pruned(new Stored(after, engagementsAfter, finalThrough), sessionsAfter, horizon);
            boolean prunedSome = remaining.pageviews().size() < after.size()
                    || remaining.engagements().size() < engagementsAfter.size();
            if (!added.isEmpty() || !addedEngagements.isEmpty() || prunedSome || !group.exists()) {
                state.events = encode(remaining);
            }
            state.watermarkMs = watermark;
            group.update(state);
            // Next look: when the watermark reaches the moment it may close a session (for the
            // live views), or the horizon the end of everything (Spark times out once its
            // watermark is past the timestamp, hence - 1).
            long next = nextChange(sessionsAfter, finalAt + allowedLatenessMs, watermark);
            group.setTimeoutTimestamp(next - watermarkShiftMs - 1);
        } else if (group.exists()) {
            group.remove(); // every session and day closed: nothing of this visitor can change
        }
        return out.iterator();
    }

    /**
     * An event as it came, with its Kafka offset: a page view, or an engagement event (of which
     * only ts, event_id and the engaged ms beside it are used).
     */
    record Copy(long offset, Event event, boolean engagement, long engagementMs) {}

    /**
     * Log order: by Kafka offset (a visitor's messages share one partition, keyed by site and
     * visitor), so the first copy of an event_id is the one the archive keeps. Ties, possible
     * only across partitions (the topic's partitions were changed), go to the content, so the
     * choice never depends on the order Spark hands the rows over in.
     */
    static final Comparator<Copy> LOG_ORDER = Comparator.comparingLong(Copy::offset)
            .thenComparingLong(copy -> copy.event().ts)
            .thenComparing(copy -> copy.event().eventId)
            .thenComparing(Copy::engagement)
            .thenComparingLong(Copy::engagementMs)
            .thenComparing(copy -> copy.event().fields, Arrays::compare);

    static List<Copy> inLogOrder(Iterator<Row> rows) {
        List<Copy> copies = new ArrayList<>();
        while (rows.hasNext()) {
            Row row = rows.next();
            String[] fields = new String[EVENT_FIELDS.length - 1];
            for (int i = 1; i < EVENT_FIELDS.length; i++) {
                fields[i - 1] = Objects.requireNonNullElse(row.<String>getAs(EVENT_FIELDS[i]), "");
            }
            Event event = new Event(row.<Long>getAs("ts_ms"), row.<String>getAs("event_id"), fields);
            boolean engagement = row.<Boolean>getAs("is_engagement");
            long engagementMs = engagement ? row.<Long>getAs("engagement_ms") : 0L;
            copies.add(new Copy(row.<Long>getAs("offset"), event, engagement, engagementMs));
        }
        copies.sort(LOG_ORDER);
        return copies;
    }

    /**
     * Whether a page view at or behind the lateness horizon would change a number already final:
     * its UTC day has ended behind the horizon, it falls within the gap of a session the horizon
     * has closed or of one pruned from the state (at or before finalThrough), or this visitor has
     * no state (nothing proves it changes nothing final).
     */
    boolean isLate(long ts, boolean noState, List<Session> sessions, long horizon, long finalThrough) {
        if (noState || floor(ts, DAY_MS) + DAY_MS <= horizon || ts <= finalThrough) {
            return true;
        }
        for (Session session : sessions) {
            boolean touches = ts >= session.first.ts - gapMs && ts <= session.last.ts + gapMs;
            if (touches && closed(session, horizon)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Whether an engagement event at or behind the watermark would change a number already
     * final: the visitor has no page view in the state (none to belong to, or all final), or it
     * belongs to a session the watermark has closed.
     */
    boolean isLateEngagement(
            long ts, boolean noPageviews, List<Session> sessions, long horizon, long finalThrough) {
        if (noPageviews || ts <= finalThrough) {
            return true;
        }
        for (Session session : sessions) {
            if (holds(session, ts)) {
                return closed(session, horizon);
            }
        }
        return false;
    }

    /**
     * The state without what the horizon has made final, so that a visitor seen every day keeps
     * a few days of page views, not all of them: every page view before the latest UTC midnight
     * C at or behind the horizon that no session crosses and before which every session is
     * closed by the horizon. Their numbers cannot change any more, and no page view still
     * counted can meet them: one after the horizon is beyond every pruned session's gap (closed)
     * and day (ended); one at or behind it is late (isLate: its day ended, or ts ≤
     * finalThrough, the end of the last pruned session's gap). Rollup deltas stay exact: the
     * pruned page views' cells are all before C, where no later page view adds to a day or a
     * session, so before and after a later call they contribute the same. Engagement events
     * before C or within a pruned session's gap go too: no page view still counted can claim
     * them.
     */
    Stored pruned(Stored stored, List<Session> sessions, long horizon) {
        for (int i = sessions.size() - 2; i >= 0; i--) {
            Session closedOne = sessions.get(i);
            long cut = floor(Math.min(sessions.get(i + 1).first.ts, horizon), DAY_MS);
            if (cut > closedOne.last.ts && closed(closedOne, horizon)) {
                List<Event> pageviews = new ArrayList<>();
                for (Event event : stored.pageviews()) {
                    if (event.ts >= cut) {
                        pageviews.add(event);
                    }
                }
                long through = Math.max(stored.finalThrough(), closedOne.last.ts + gapMs);
                List<Engagement> engagements = new ArrayList<>();
                for (Engagement engagement : stored.engagements()) {
                    if (engagement.ts() >= cut && engagement.ts() > through) {
                        engagements.add(engagement);
                    }
                }
                return new Stored(pageviews, engagements, through);
            }
        }
        return stored;
    }

    /** Whether an engagement event at ts belongs to the session: ts in [first, last + gap]. */
    boolean holds(Session session, long ts) {
        return ts >= session.first.ts && ts <= session.last.ts + gapMs;
    }

    /** The event time at which the watermark next closes something of this visitor. */
    long nextChange(List<Session> sessions, long finalAt, long watermark) {
        long next = finalAt;
        for (Session session : sessions) {
            if (!closed(session, watermark)) {
                next = Math.min(next, session.last.ts + gapMs);
            }
        }
        return next;
    }

    /**
     * The event time from which the watermark makes every number of these page views final:
     * the last session closed (last page view + gap) and the last UTC day ended; and no newer
     * engagement event waits for a page view still to come (one at or before it, which the
     * watermark makes late once it passes the engagement event).
     */
    long finalAt(List<Event> events, List<Engagement> engagements) {
        long at = Long.MIN_VALUE;
        if (!events.isEmpty()) {
            long last = events.get(events.size() - 1).ts;
            at = Math.max(last + gapMs, floor(last, DAY_MS) + DAY_MS);
        }
        if (!engagements.isEmpty()) {
            at = Math.max(at, engagements.get(engagements.size() - 1).ts());
        }
        return at;
    }

    // --- sessions -----------------------------------------------------------------------------

    /** The sessions of these page views (in time order), with the engaged ms of each. */
    List<Session> sessions(List<Event> events, List<Engagement> engagements) {
        List<Session> sessions = sessions(events);
        int next = 0; // sessions and engagement events are both in time order, their spans disjoint
        for (Engagement engagement : engagements) {
            while (next < sessions.size() && engagement.ts() > sessions.get(next).last.ts + gapMs) {
                next++;
            }
            if (next < sessions.size() && holds(sessions.get(next), engagement.ts())) {
                sessions.get(next).engagedMs += engagement.ms();
            }
        }
        return sessions;
    }

    /**
     * The sessions of these page views (in time order). Every path a session viewed is kept, with
     * no cap: a visit counts under a page filter if any of its page views matches, however many
     * pages it viewed (migration 0063), and the state holds each of those page views already.
     */
    List<Session> sessions(List<Event> events) {
        List<Session> sessions = new ArrayList<>();
        Event first = null;
        Event previous = null;
        long count = 0;
        LinkedHashSet<String> paths = new LinkedHashSet<>();
        // The journey folds consecutive repeats only (a reload, / → / is one step); events are in
        // (ts, event_id) order already, so ties in one ms go to the smaller event_id.
        List<String> journey = new ArrayList<>();
        for (Event event : events) {
            if (previous != null && event.ts - previous.ts > gapMs) {
                sessions.add(session(first, previous, count, paths, journey));
                first = null;
            }
            if (first == null) {
                first = event;
                count = 0;
                paths.clear();
                journey.clear();
            }
            count++;
            String path = event.field("path");
            paths.add(path);
            if (journey.isEmpty() || !journey.get(journey.size() - 1).equals(path)) {
                journey.add(path);
            }
            previous = event;
        }
        if (first != null) {
            sessions.add(session(first, previous, count, paths, journey));
        }
        return sessions;
    }

    private static Session session(Event first, Event last, long count, Collection<String> paths, List<String> journey) {
        return new Session(first, last, count, List.copyOf(paths), List.copyOf(journey));
    }

    boolean closed(Session session, long watermark) {
        return session.last.ts + gapMs <= watermark;
    }

    /** New, grown, merged or newly closed sessions as rows; tombstones for starts that moved. */
    void emitSessionChanges(
            String site, String visitorId, List<Session> before, long watermarkBefore,
            List<Session> after, long watermark, List<Row> out) {
        Map<Long, Session> previous = new HashMap<>();
        for (Session session : before) {
            previous.put(session.first.ts, session);
        }
        for (Session session : after) {
            Session old = previous.remove(session.first.ts);
            boolean closedNow = closed(session, watermark);
            boolean unchanged = old != null && session.sameAs(old) && closed(old, watermarkBefore) == closedNow;
            if (!unchanged) {
                out.add(sessionRow(site, visitorId, session, isBounce(session), closedNow, false));
            }
        }
        for (Session gone : previous.values()) {
            out.add(sessionRow(site, visitorId, gone, isBounce(gone), false, true));
        }
    }

    // --- rollup contributions -----------------------------------------------------------------

    /** What these page views (one visitor's, and their sessions) add to every rollup cell. */
    Map<Cell, long[]> contribution(List<Event> events, List<Session> sessions) {
        Map<Cell, long[]> cells = new HashMap<>();
        if (events.isEmpty()) {
            return cells;
        }
        // Points per facet, in time order: page views for the event dimensions and the totals.
        Map<List<String>, List<Long>> points = new HashMap<>();
        for (Event event : events) {
            long minute = floor(event.ts, MINUTE_MS);
            addPageview(cells, points, minute, event.ts, TOTAL, TOTAL);
            for (String dimension : EVENT_DIMENSIONS) {
                addPageview(cells, points, minute, event.ts, dimension, event.field(dimension));
            }
        }
        // Sessions count at their start: totals (sessions, bounces, duration) and the session
        // dimensions (those, plus their page views, and their visitors by session start).
        for (Session session : sessions) {
            long minute = floor(session.first.ts, MINUTE_MS);
            addSession(cell(cells, minute, TOTAL, TOTAL), session);
            for (String dimension : SESSION_DIMENSIONS) {
                String value = sessionProperty(session, dimension);
                long[] metrics = cell(cells, minute, dimension, value);
                addSession(metrics, session);
                metrics[PAGEVIEWS] += session.pageviews;
                points.computeIfAbsent(List.of(dimension, value), k -> new ArrayList<>()).add(session.first.ts);
            }
        }
        for (Map.Entry<List<String>, List<Long>> facet : points.entrySet()) {
            countVisitor(cells, facet.getKey().get(0), facet.getKey().get(1), facet.getValue());
        }
        return cells;
    }

    /** A session dimension's value: entry / exit page, or an attribute of its first page view. */
    static String sessionProperty(Session session, String dimension) {
        return switch (dimension) {
            case "entry_path" -> session.first.field("path");
            case "exit_path" -> session.last.field("path");
            default -> session.first.field(dimension);
        };
    }

    private static void addPageview(
            Map<Cell, long[]> cells, Map<List<String>, List<Long>> points, long minute, long ts,
            String dimension, String value) {
        cell(cells, minute, dimension, value)[PAGEVIEWS] += 1;
        points.computeIfAbsent(List.of(dimension, value), k -> new ArrayList<>()).add(ts);
    }

    /** A bounce: one page view and less than engagedBounceMs of engaged time. */
    boolean isBounce(Session session) {
        return session.pageviews == 1 && session.engagedMs < engagedBounceMs;
    }

    private void addSession(long[] metrics, Session session) {
        metrics[SESSIONS] += 1;
        metrics[BOUNCES] += isBounce(session) ? 1 : 0;
        metrics[DURATION_MS] += session.durationMs();
    }

    /**
     * This visitor, once per bucket of each resolution, at the minute of its first point in
     * the bucket (minute, hour, day), and at the minute of its last point in each day.
     */
    private static void countVisitor(Map<Cell, long[]> cells, String dimension, String value, List<Long> times) {
        Collections.sort(times);
        long minute = Long.MIN_VALUE;
        long hour = Long.MIN_VALUE;
        long day = Long.MIN_VALUE;
        for (int i = 0; i < times.size(); i++) {
            long ts = times.get(i);
            long m = floor(ts, MINUTE_MS);
            if (m != minute) {
                cell(cells, m, dimension, value)[VISITORS] += 1;
                minute = m;
            }
            if (floor(ts, HOUR_MS) != hour) {
                cell(cells, m, dimension, value)[HOUR_FIRST_VISITORS] += 1;
                hour = floor(ts, HOUR_MS);
            }
            if (floor(ts, DAY_MS) != day) {
                cell(cells, m, dimension, value)[DAY_FIRST_VISITORS] += 1;
                day = floor(ts, DAY_MS);
            }
            boolean lastOfDay = i == times.size() - 1 || floor(times.get(i + 1), DAY_MS) != day;
            if (lastOfDay) {
                cell(cells, m, dimension, value)[DAY_LAST_VISITORS] += 1;
            }
        }
    }

    private static long[] cell(Map<Cell, long[]> cells, long minute, String dimension, String value) {
        return cells.computeIfAbsent(new Cell(minute, dimension, value), k -> new long[METRICS.length]);
    }

    /** after − before, cell by cell; cells that did not change are not emitted. */
    static void emitRollupDeltas(String site, Map<Cell, long[]> before, Map<Cell, long[]> after, List<Row> out) {
        Map<Cell, long[]> delta = new TreeMap<>(Comparator.comparingLong(Cell::minute)
                .thenComparing(Cell::dimension).thenComparing(Cell::value));
        for (Map.Entry<Cell, long[]> entry : after.entrySet()) {
            delta.put(entry.getKey(), entry.getValue().clone());
        }
        for (Map.Entry<Cell, long[]> entry : before.entrySet()) {
            long[] metrics = delta.computeIfAbsent(entry.getKey(), k -> new long[METRICS.length]);
            for (int i = 0; i < METRICS.length; i++) {
                metrics[i] -= entry.getValue()[i];
            }
        }
        for (Map.Entry<Cell, long[]> entry : delta.entrySet()) {
            long[] metrics = entry.getValue();
            boolean changed = false;
            for (long metric : metrics) {
                changed |= metric != 0;
            }
            if (changed) {
                Cell cell = entry.getKey();
                out.add(rollup(site, cell.minute(), cell.dimension(), cell.value(), metrics));
            }
        }
    }

    static long floor(long ts, long unit) {
        return Math.floorDiv(ts, unit) * unit;
    }

    // --- output rows --------------------------------------------------------------------------

    static StructType outputSchema() {
        StructType schema = new StructType()
                .add("kind", DataTypes.StringType, false)
                .add("site", DataTypes.StringType, false)
                .add("bucket_ms", DataTypes.LongType, true)
                .add("dimension", DataTypes.StringType, true)
                .add("value", DataTypes.StringType, true)
                .add("ip_hash", DataTypes.StringType, true);
        for (String metric : METRICS) {
            schema = schema.add(metric, DataTypes.LongType, true);
        }
        schema = schema
                .add("visitor_id", DataTypes.StringType, true)
                .add("session_start_ms", DataTypes.LongType, true)
                .add("session_end_ms", DataTypes.LongType, true)
                .add("session_pageviews", DataTypes.LongType, true)
                .add("entry_path", DataTypes.StringType, true)
                .add("exit_path", DataTypes.StringType, true);
        for (String name : SESSION_ROW_FIELDS) {
            schema = schema.add(name, DataTypes.StringType, true);
        }
        return schema
                .add("paths", DataTypes.createArrayType(DataTypes.StringType, false), true)
                .add("journey", DataTypes.createArrayType(DataTypes.StringType, false), true)
                .add("session_engaged_ms", DataTypes.LongType, true)
                .add("is_bounce", DataTypes.IntegerType, true)
                .add("is_closed", DataTypes.IntegerType, true)
                .add("is_deleted", DataTypes.IntegerType, true);
    }

    private static Object[] blank(String kind, String site) {
        Object[] values = new Object[OUTPUT.size()];
        values[0] = kind;
        values[1] = site;
        return values;
    }

    static Row rollup(String site, long minute, String dimension, String value, long[] metrics) {
        Object[] values = blank("rollup", site);
        values[2] = minute;
        values[3] = dimension;
        values[4] = value;
        for (int i = 0; i < METRICS.length; i++) {
            values[6 + i] = metrics[i];
        }
        return RowFactory.create(values);
    }

    static Row pane(String site, String ipHash, long minute, long pageviews) {
        Object[] values = blank("pane", site);
        values[2] = minute;
        values[5] = ipHash;
        values[6 + PAGEVIEWS] = pageviews;
        return RowFactory.create(values);
    }

    static Row late(String site, long minute, long pageviews) {
        Object[] values = blank("late", site);
        values[2] = minute;
        values[6 + PAGEVIEWS] = pageviews;
        return RowFactory.create(values);
    }

    static Row sessionRow(
            String site, String visitorId, Session session, boolean bounce, boolean closed, boolean deleted) {
        Object[] values = blank("session", site);
        int i = 6 + METRICS.length;
        values[i++] = visitorId;
        values[i++] = session.first.ts;
        values[i++] = session.last.ts;
        values[i++] = session.pageviews;
        values[i++] = session.first.field("path");
        values[i++] = session.last.field("path");
        for (String name : SESSION_ROW_FIELDS) {
            values[i++] = session.first.field(name);
        }
        values[i++] = session.paths.toArray(new String[0]);
        values[i++] = session.journey.toArray(new String[0]);
        values[i++] = session.engagedMs;
        values[i++] = bounce ? 1 : 0;
        values[i++] = closed ? 1 : 0;
        values[i] = deleted ? 1 : 0;
        return RowFactory.create(values);
    }
}
