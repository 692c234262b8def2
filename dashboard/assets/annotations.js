// The Annotations section in view (dashboard/annotations_panel.py): when its status line changes
// (a click on the "Over time" chart opened it with a date, or a note was added), the text field is
// scrolled into view and focused, once the Settings view shows (its tab switch is a round trip).
window.dash_clientside = window.dash_clientside || {};
window.dash_clientside.tally = Object.assign(window.dash_clientside.tally || {}, {
    annotationFormInView: function (status) {
        const dc = window.dash_clientside;
        let tries = 20;
        const show = function () {
            const text = document.getElementById("annotation-text");
            if (text && text.offsetParent !== null) {
                text.scrollIntoView({ block: "center" });
                text.focus({ preventScroll: true });
            } else if (tries-- > 0) {
                window.setTimeout(show, 100);
            }
        };
        if (status) {
            show();
        }
        return dc.no_update;
    },
});
