// A student's page watches its class's change number (issue 41; app/classroom/watch.py mounts this, app/classroom/beacon.py
// writes the number). Every period it fetches one tiny static file and asks Streamlit for a run of the page's live part
// (setTriggerValue: the fragment this is mounted in reruns) only when the number is not the one the page was drawn at;
// an unchanged class costs a fetch, no Streamlit run and no redraw. Without a file to read (data.path null: static
// serving off, or no file could be written) or while fetching fails, it asks for a run every period: the page then
// polls the server as it did before this watch.
// It also shows the class's result (data.page: HTML the server built from escaped text and numbers) in its own element;
// when the number moves, it first fetches this student's result file (data.page_path, written at a Reveal before the
// number moved, first line <!--vN-->) and shows it if it was written for the number it saw: the Reveal is on screen
// before the page's Streamlit run, which then brings the same HTML.
export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  // Streamlit calls this again when `data` changes, without running the last call's cleanup: stop that call's loop.
  if (parentElement.__classWatch) parentElement.__classWatch.stop();
  let stopped = false;
  let timer = null;
  let asked = null; // the number this call last asked a run for (asked once per number)
  let polls = 0;
  const period = Math.max(500, Number(data.period_ms) || 2000); // between fetches of the file
  const pollPeriod = Math.max(500, Number(data.poll_ms) || 2000); // between runs asked for without a file
  const url = data.path ? new URL(data.path, document.baseURI).href : null;
  const pageUrl = data.page_path ? new URL(data.page_path, document.baseURI).href : null;
  show(typeof data.page === "string" ? data.page : "");
  release(Number(data.committed) || 0);

  function release(committed) {
    // A prediction sent since the last call: the prediction input lets go of its focus (a phone's keyboard closes;
    // an idle page stops redrawing the caret). The first call after the page loads only notes the count. The count is
    // the window's, not the element's: the run that sends a prediction may remount the watch (an element above it).
    const before = window.__speclabCommitted;
    window.__speclabCommitted = committed;
    if (before === undefined || committed <= before) return;
    const focused = document.activeElement;
    if (focused && focused.closest && focused.closest('[data-testid="stNumberInput"]')) focused.blur();
  }

  function show(html) {
    if (parentElement.__classPage === html) return; // unchanged: the element is left alone (no redraw)
    parentElement.__classPage = html;
    parentElement.innerHTML = html;
  }

  async function get(address, limitMs) {
    const abort = new AbortController();
    const limit = setTimeout(() => abort.abort(), limitMs);
    try {
      const response = await fetch(address, { cache: "no-store", signal: abort.signal, credentials: "omit" });
      return response.ok ? await response.text() : null;
    } catch (error) {
      return null;
    } finally {
      clearTimeout(limit);
    }
  }

  async function read() {
    if (url === null) return null;
    const text = await get(url, Math.min(period, 5000));
    return text !== null && /^[0-9]{1,18}$/.test(text.trim()) ? text.trim() : null;
  }

  async function showRevealed(seen) {
    // This student's result, if the file was written for the number just seen (a Reveal); else nothing to show early.
    if (pageUrl === null) return;
    const text = await get(pageUrl, 5000);
    const mark = `<!--v${seen}-->\n`;
    if (text !== null && text.startsWith(mark) && !stopped && parentElement.isConnected) show(text.slice(mark.length));
  }

  async function tick() {
    // A page rerun that moves or replaces this component (the class following the teacher to another lesson) can unmount
    // it without running the cleanup below: a loop left behind would ask runs for a fragment the page no longer shows
    // (issue 41: seen as runs that drew the old lesson's class line over a page's revealed result). It stops here.
    if (!parentElement.isConnected) watch.stop();
    if (stopped) return;
    const seen = await read();
    if (stopped || !parentElement.isConnected) return watch.stop();
    if (seen === null) {
      polls += 1;
      setTriggerValue("poll", polls); // no number to watch: poll the server, as before
    } else if (seen !== String(data.version) && seen !== asked) {
      asked = seen;
      await showRevealed(seen);
      if (stopped || !parentElement.isConnected) return watch.stop();
      setTriggerValue("changed", seen);
    }
    timer = setTimeout(tick, seen === null ? pollPeriod : period);
  }

  const watch = {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
  parentElement.__classWatch = watch;
  timer = setTimeout(tick, period);
  return () => watch.stop();
}
