// PR-XAI Explorer: the pages' shared API client (loaded before app.js and generation.js).
// Every request carries this page's session: jobs belong to it, so another tab cannot read or cancel them.
"use strict";

const SESSION = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");

class ApiError extends Error {
  constructor(message, status, body) { super(message); this.status = status; this.body = body; }
}

// GET path (no body) or POST body as JSON; a JSON answer is parsed, any other is returned as the Response.
// An error status throws an ApiError with the server's one-line message.
async function apiRequest(path, body) {
  const opts = body === undefined ? { headers: { "X-PRXAI-Session": SESSION } } : {
    method: "POST", headers: { "Content-Type": "application/json", "X-PRXAI-Session": SESSION }, body: JSON.stringify(body),
  };
  const resp = await fetch(path, opts);
  const type = resp.headers.get("Content-Type") || "";
  if (!resp.ok) {
    let message = `${resp.status} ${resp.statusText}`;
    let data = null;
    if (type.includes("json")) { data = await resp.json(); message = data.error || message; }
    throw new ApiError(message, resp.status, data);
  }
  return type.includes("json") ? resp.json() : resp;
}
