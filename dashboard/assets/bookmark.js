// The site picker and the address bar's `?site=` in step (dashboard/bookmark.py): a site the
// address names is chosen if it is one of the picker's options (the sites the server listed for
// this viewer), and a site picked is written into the address (a history entry, no reload).
window.dash_clientside = window.dash_clientside || {};
window.dash_clientside.tally = Object.assign(window.dash_clientside.tally || {}, {
    siteInAddress: function (search, site, options, pathname) {
        const dc = window.dash_clientside;
        const unchanged = [dc.no_update, dc.no_update];
        const path = pathname == null ? window.location.pathname : pathname;
        if (path.startsWith("/share/")) {
            return unchanged; // a shared link's page: its one site, its own address
        }
        const params = new URLSearchParams(search == null ? window.location.search : search);
        const named = params.getAll("site");
        const wanted = named.length === 1 ? named[0] : null;
        const listed = (options || []).map((option) =>
            option !== null && typeof option === "object" ? option.value : option
        );
        const picked = dc.callback_context.triggered_id === "site";
        if (!picked) {
            // The page starting, or back and forward: the picker follows the address, to a site
            // it lists.
            if (wanted !== null && wanted !== site && listed.includes(wanted)) {
                return [dc.no_update, wanted];
            }
            if (named.length > 0 && site && listed.length > 0 && !listed.includes(wanted)) {
                // A site this viewer does not have (a typo, a site removed) is ignored, and the
                // address says the site shown instead, in place: a bookmark taken now is right,
                // and Back does not return to the ignored one. (No options: the store is down,
                // nothing is known to be wrong yet.) dcc.Location can only push an entry, so the
                // entry is replaced here and the Location told as on Back (popstate): it takes
                // the address as it is, and pushes nothing.
                params.delete("site");
                params.set("site", site);
                const fixed = path + "?" + params.toString() + window.location.hash;
                window.history.replaceState(window.history.state, "", fixed);
                window.dispatchEvent(new PopStateEvent("popstate", {state: window.history.state}));
            }
            return unchanged;
        }
        if (!site || wanted === site) {
            return unchanged;
        }
        params.delete("site");
        params.set("site", site);
        return ["?" + params.toString(), dc.no_update];
    },
});
