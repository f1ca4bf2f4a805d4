// Talking to the dashboard's routes, and polling them while the page is visible.

export const POLL_MS = 2000;

export async function getJSON(path) {
  const reply = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await reply.json().catch(() => ({}));
  if (!reply.ok) {
    throw new Error(body.error || `${path} answered ${reply.status}`);
  }
  return body;
}

export async function postJSON(path, value = {}) {
  const reply = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(value),
  });
  const body = await reply.json().catch(() => ({}));
  if (!reply.ok) {
    throw new Error(body.error || `${path} answered ${reply.status}`);
  }
  return body;
}

// Calls `load()` now and every POLL_MS after the previous call ended; never two at once.
// While the document is hidden nothing is fetched; it resumes at once when shown again.
export class Poller {
  constructor(load, onState) {
    this.load = load;
    this.onState = onState; // ("live" | "paused" | "error", detail)
    this.timer = null;
    this.stopped = false;
    this.running = false;
    this.visibility = () => {
      if (document.hidden) {
        this.clear();
        this.onState("paused");
      } else {
        this.tick();
      }
    };
    document.addEventListener("visibilitychange", this.visibility);
  }

  clear() {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  async tick() {
    this.clear();
    if (this.stopped || this.running || document.hidden) return;
    this.running = true;
    try {
      await this.load();
      this.onState("live");
    } catch (err) {
      this.onState("error", err.message);
    } finally {
      this.running = false;
    }
    if (!this.stopped && !document.hidden) {
      this.timer = setTimeout(() => this.tick(), POLL_MS);
    }
  }

  stop() {
    this.stopped = true;
    this.clear();
    document.removeEventListener("visibilitychange", this.visibility);
  }
}
