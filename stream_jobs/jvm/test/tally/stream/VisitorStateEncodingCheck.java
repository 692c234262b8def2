package tally.stream;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.List;

/**
 * Visitor states survive every encoding change: a state written by the first encoder (v1, ten
 * fields, no version marker), as running deployments hold in their checkpoints, decodes with its
 * values in place and the new fields empty; a v2 state (with the dimensions, before engaged
 * sessions) decodes with no engagement event; a state is written as v3 and reads back unchanged,
 * engagement events included; a v3 state decodes with nothing pruned, and a state is written as v4
 * (the end of what was pruned from it, finalThrough) and reads back unchanged.
 * Run by tests/unit/test_visitor_state_encoding.py (javac + java, no Spark session): exits 1 with
 * the failed check on stderr.
 */
public final class VisitorStateEncodingCheck {

    private VisitorStateEncodingCheck() {}

    public static void main(String[] args) throws IOException {
        List<VisitorActivity.Event> v1 = VisitorActivity.decode(v1State());
        check(v1.size() == 2, "two page views decoded from a v1 state, got " + v1.size());
        VisitorActivity.Event first = v1.get(0);
        check(first.ts == 1_700_000_000_000L && first.eventId.equals("id-0"), "ts and event_id of a v1 page view");
        for (int i = 1; i < VisitorActivity.V1_EVENT_FIELDS.length; i++) {
            String name = VisitorActivity.V1_EVENT_FIELDS[i];
            check(first.field(name).equals(name + "-0"), "v1 field " + name + " = " + first.field(name));
        }
        for (String added : new String[] {"utm_content", "utm_term", "language", "screen_size"}) {
            check(first.field(added).isEmpty(), "a field v1 lacks reads '': " + added + " = " + first.field(added));
        }
        check(v1.get(1).field("path").equals("path-1"), "second v1 page view's path");

        VisitorActivity.Stored fromV2 = VisitorActivity.decodeState(v2State());
        check(fromV2.pageviews().size() == 1, "one page view decoded from a v2 state");
        check(fromV2.pageviews().get(0).field("screen_size").equals("screen_size-0"), "v2 field screen_size");
        check(fromV2.engagements().isEmpty(), "a v2 state has no engagement event");

        VisitorActivity.Stored fromV3 = VisitorActivity.decodeState(v3State());
        check(fromV3.pageviews().size() == 1 && fromV3.engagements().size() == 1, "a v3 state decodes");
        check(fromV3.finalThrough() == Long.MIN_VALUE, "a v3 state has nothing pruned");

        byte[] v4 = VisitorActivity.encode(v1);
        check(v4[3] == -4 && v4[0] == -1, "a state is written with the v4 marker");
        List<VisitorActivity.Event> again = VisitorActivity.decode(v4);
        check(again.size() == 2, "v4 round trip keeps the page views");
        VisitorActivity.Stored pruned = VisitorActivity.decodeState(
                VisitorActivity.encode(new VisitorActivity.Stored(v1, List.of(), 1_234L)));
        check(pruned.finalThrough() == 1_234L && pruned.pageviews().size() == 2, "v4 round trip keeps finalThrough");
        List<VisitorActivity.Engagement> engagements =
                List.of(new VisitorActivity.Engagement(7L, "e-1", 6_000L), new VisitorActivity.Engagement(9L, "e-2", 12L));
        VisitorActivity.Stored both = VisitorActivity.decodeState(VisitorActivity.encode(v1, engagements));
        check(both.engagements().equals(engagements), "v3 round trip keeps the engagement events");
        check(both.pageviews().size() == 2, "v3 round trip keeps the page views beside engagement events");
        String[] fields = new String[VisitorActivity.EVENT_FIELDS.length - 1];
        for (int i = 0; i < fields.length; i++) {
            fields[i] = "value-" + i;
        }
        List<VisitorActivity.Event> full =
                VisitorActivity.decode(VisitorActivity.encode(List.of(new VisitorActivity.Event(5L, "id", fields))));
        check(java.util.Arrays.equals(full.get(0).fields, fields), "v2 round trip keeps every field");
        check(VisitorActivity.decode(new byte[0]).isEmpty(), "an empty state is no page views");
        try {
            VisitorActivity.decode(new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xfb, 0, 0, 0, 0});
            check(false, "an unknown encoding marker (-5) is refused");
        } catch (IllegalStateException expected) {
            // refused, not misread
        }
        System.out.println("ok");
    }

    /** Two page views exactly as the first encoder (v1) wrote them. */
    private static byte[] v1State() throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeInt(2);
        for (int n = 0; n < 2; n++) {
            out.writeLong(1_700_000_000_000L + n);
            out.writeUTF("id-" + n);
            for (int i = 1; i < VisitorActivity.V1_EVENT_FIELDS.length; i++) {
                out.writeUTF(VisitorActivity.V1_EVENT_FIELDS[i] + "-" + n);
            }
        }
        out.flush();
        return bytes.toByteArray();
    }

    /** One page view exactly as the encoder of v2 (with the dimensions) wrote it. */
    private static byte[] v2State() throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeInt(-2);
        out.writeInt(1);
        out.writeLong(1_700_000_000_000L);
        out.writeUTF("id-0");
        for (int i = 1; i < VisitorActivity.EVENT_FIELDS.length; i++) {
            out.writeUTF(VisitorActivity.EVENT_FIELDS[i] + "-0");
        }
        out.flush();
        return bytes.toByteArray();
    }

    /** One page view and one engagement event exactly as the encoder of v3 (engaged sessions) wrote them. */
    private static byte[] v3State() throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeInt(-3);
        out.writeInt(1);
        out.writeLong(1_700_000_000_000L);
        out.writeUTF("id-0");
        for (int i = 1; i < VisitorActivity.EVENT_FIELDS.length; i++) {
            out.writeUTF(VisitorActivity.EVENT_FIELDS[i] + "-0");
        }
        out.writeInt(1);
        out.writeLong(1_700_000_001_000L);
        out.writeUTF("e-0");
        out.writeLong(5_000L);
        out.flush();
        return bytes.toByteArray();
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            System.err.println("failed: " + what);
            System.exit(1);
        }
    }
}
