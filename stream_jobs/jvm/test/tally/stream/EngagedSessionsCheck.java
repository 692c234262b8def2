package tally.stream;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Engaged sessions in VisitorActivity, without Spark: which session an engagement event belongs
 * to ([first page view, last page view + gap]) and the bounce rule (one page view and less than
 * engagedBounceMs of engaged time), on the known answers of tests/fixtures/events.py's
 * engaged_bounce_visits. Run by tests/unit/test_visitor_state_encoding.py: exits 1 with the
 * failed check on stderr.
 */
public final class EngagedSessionsCheck {

    private static final long GAP_MS = 1_800_000L;
    private static final VisitorActivity FUNCTION = new VisitorActivity(GAP_MS, 0L, 10_000L, 0L);

    private EngagedSessionsCheck() {}

    public static void main(String[] args) {
        check(engaged(List.of(0L), List.of(at(12_000, 12_000))) == 12_000, "12 s read");
        check(!bounce(List.of(0L), List.of(at(12_000, 12_000))), "12 s: no bounce");
        check(bounce(List.of(0L), List.of(at(3_000, 3_000))), "3 s: a bounce");
        check(!bounce(List.of(0L), List.of(at(6_000, 6_000), at(60_000, 6_000))), "6 s twice: no bounce");
        check(bounce(List.of(0L), List.of(at(GAP_MS + 1, 60_000))), "after the session ended: a bounce");
        check(!bounce(List.of(0L), List.of(at(GAP_MS, 10_000))), "exactly the gap after: no bounce");
        check(bounce(List.of(0L), List.of(at(-1, 60_000))), "before the page view: no session's");
        check(!bounce(List.of(0L, 10_000L), List.of()), "two page views: never a bounce");
        // Two sessions (a gap of 40 min): the engagement event 35 min after the first page view
        // belongs to neither; one 5 min after the second belongs to the second.
        List<VisitorActivity.Session> two = sessions(
                List.of(0L, 2_400_000L), List.of(at(2_100_000, 20_000), at(2_700_000, 11_000)));
        check(two.size() == 2 && two.get(0).engagedMs == 0 && two.get(1).engagedMs == 11_000,
                "each engagement event in its own session's span only");
        System.out.println("ok");
    }

    private static VisitorActivity.Engagement at(long ts, long ms) {
        return new VisitorActivity.Engagement(ts, "e-" + ts, ms);
    }

    private static List<VisitorActivity.Session> sessions(List<Long> pageviews, List<VisitorActivity.Engagement> engagements) {
        List<VisitorActivity.Event> events = new ArrayList<>();
        for (long ts : pageviews) {
            String[] fields = new String[VisitorActivity.EVENT_FIELDS.length - 1];
            Arrays.fill(fields, "");
            events.add(new VisitorActivity.Event(ts, "p-" + ts, fields));
        }
        return FUNCTION.sessions(events, engagements);
    }

    private static long engaged(List<Long> pageviews, List<VisitorActivity.Engagement> engagements) {
        return sessions(pageviews, engagements).get(0).engagedMs;
    }

    private static boolean bounce(List<Long> pageviews, List<VisitorActivity.Engagement> engagements) {
        List<VisitorActivity.Session> found = sessions(pageviews, engagements);
        check(found.size() == 1, "one session");
        return FUNCTION.isBounce(found.get(0));
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            System.err.println("failed: " + what);
            System.exit(1);
        }
    }
}
