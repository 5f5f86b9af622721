// mlroute live view. Polls the controller's REST API once a second (GET only) and draws the
// fabric as SVG: a leaf-spine with spines on top and leaves below; a three-tier Clos with cores
// on top, aggregation switches in the middle grouped by pod and leaves below; a fabric of
// several planes as its planes side by side, each labelled, their leaves on one row; hosts
// once, under their leaf (several planes: between their leaves, linked to each). Every
// directed switch link (every tier, every plane) is coloured by the flows planned on it and as
// wide as its measured rate; links that are down dashed and red. Below: the running jobs
// (ideal, predicted and measured All-Reduce time; whether the counted bytes followed the
// planned spine or path) and the recent events (failures, repairs, re-plans).
// Plain JavaScript, no library, no build step. Data: GET v1/fabric (declared fabric, switches
// seen, links down, events), v1/links (planned and measured per directed link), v1/jobs and
// v1/jobs/{id} (routes with their measured bytes).
"use strict";

(function () {
  const POLL_MS = 1000;
  const RATE_WINDOW_S = 6; // rule counters refresh every statistics interval (2 s by default)
  const MAX_JOB_DETAILS = 32; // per poll; more jobs are listed without their measured figures
  const MAX_DRAWN_HOSTS = 256;
  const SVG_NS = "http://www.w3.org/2000/svg";

  const state = {
    busy: false,
    signature: null, // the drawn topology; redrawn only when it changes
    linkEls: {}, // "l0->s0" -> <line>
    linkPairs: {}, // "s0->l0" -> ["l0", "s0"] (lower tier first, as links down are named)
    switchEls: {}, // "s0" -> <g>
    samples: {}, // job number -> route index -> [[t, bytes], ...]
  };

  const $ = (id) => document.getElementById(id);

  // A controller with credentials configured: the page reads with the token given once as
  // the address's fragment (#token=T; a fragment is never sent to a server), kept for this
  // tab only and taken off the address bar.
  const TOKEN = (function () {
    const m = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
    if (m) {
      sessionStorage.setItem("mlroute-token", decodeURIComponent(m[1]));
      history.replaceState(null, "", window.location.pathname + window.location.search);
    }
    return sessionStorage.getItem("mlroute-token");
  })();

  async function getJSON(path) {
    const headers = TOKEN ? { Authorization: "Bearer " + TOKEN } : {};
    const resp = await fetch(path, { cache: "no-store", headers: headers });
    let body = null;
    try {
      body = await resp.json();
    } catch (e) {
      body = null;
    }
    return { status: resp.status, body: body };
  }

  // ---- formatting ---------------------------------------------------------------------
  function num(x) { // three significant digits at most: 5.00, 12.4, 100
    return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
  }

  function fmtRate(bps) {
    if (bps === null || bps === undefined) return "not measured";
    if (bps >= 1e9) return num(bps / 1e9) + " Gbit/s";
    if (bps >= 1e6) return num(bps / 1e6) + " Mbit/s";
    if (bps >= 1e3) return num(bps / 1e3) + " kbit/s";
    return bps.toFixed(0) + " bit/s";
  }

  function fmtBytes(b) {
    if (b >= 1e9) return num(b / 1e9) + " GB";
    if (b >= 1e6) return num(b / 1e6) + " MB";
    if (b >= 1e3) return num(b / 1e3) + " kB";
    return b.toFixed(0) + " B";
  }

  function fmtSeconds(s) {
    if (s === null || s === undefined || !isFinite(s)) return "—";
    return s >= 100 ? s.toFixed(0) : s >= 10 ? s.toFixed(1) : s.toFixed(3);
  }

  function fmtTime(t) {
    const d = new Date(t * 1000);
    return d.toTimeString().slice(0, 8);
  }

  function flowsColour(flows) {
    if (!(flows > 0)) return "var(--flows0)";
    if (flows <= 1) return "var(--flows1)";
    if (flows <= 2) return "var(--flows2)";
    return "var(--flows3)";
  }

  function svg(tag, attrs, parent) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const k in attrs) el.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(el);
    return el;
  }

  function setText(el, text) {
    if (el.textContent !== text) el.textContent = text;
  }

  // ---- fabric drawing -----------------------------------------------------------------
  // The declared document as planes (a document without "planes" is one plane), each in one
  // shape for both kinds: tiers top to bottom (two tiers: spines, leaves; three: cores,
  // aggregation switches, leaves) and every switch link as [lower, upper]. Planes share no
  // switch and no link; they share the hosts, each on one leaf of every plane.
  function planeOf(p, q) {
    const name = p.name || `plane${q}`; // as the controller names an unnamed plane
    if (!p.pods) {
      const links = [];
      for (const leaf of p.leaves) for (const spine of p.spines) links.push([leaf, spine]);
      return { name: name, kind: "two-tier", leaves: p.leaves, links: links, pods: [],
        groups: [], tiers: [{ role: "spine", names: p.spines },
          { role: "leaf", names: p.leaves }] };
    }
    const pods = Object.keys(p.pods).map((pod) => ({
      name: pod, leaves: p.pods[pod].leaves || [], aggs: p.pods[pod].aggs || [] }));
    const groups = p.cores || [];
    const links = [];
    for (const pod of pods) {
      for (const leaf of pod.leaves) for (const agg of pod.aggs) links.push([leaf, agg]);
    }
    for (const pod of pods) {
      pod.aggs.forEach((agg, slot) => {
        for (const core of groups[slot] || []) links.push([agg, core]);
      });
    }
    const leaves = [].concat(...pods.map((x) => x.leaves));
    return { name: name, kind: "clos", pods: pods, groups: groups, leaves: leaves, links: links,
      tiers: [{ role: "core", names: [].concat(...groups) },
        { role: "agg", names: [].concat(...pods.map((x) => x.aggs)) },
        { role: "leaf", names: leaves }] };
  }

  // The fabric: its planes and, over all of them, every tier, link and leaf. Its kind says
  // what routes give: "two-tier" (one leaf-spine plane) their spine, "clos" (three tiers or
  // several planes) their path.
  function topologyOf(declared) {
    const planes = (declared.planes || [declared]).map(planeOf);
    const hostLeaves = {}; // host -> its leaf in every plane, in plane order
    for (const h of Object.keys(declared.hosts || {}).sort()) {
      hostLeaves[h] = [].concat(declared.hosts[h]); // one plane: a name, not a list
    }
    const all = (key) => [].concat(...planes.map((p) => p[key]));
    return { kind: planes.length === 1 ? planes[0].kind : "clos", planes: planes,
             hostLeaves: hostLeaves, hostIp: declared.host_ip || {}, speeds: declared.link_gbps,
             tiers: all("tiers"), links: all("links"), leaves: new Set(all("leaves")) };
  }

  const ROLE_NAMES = { spine: "spine", leaf: "leaf", agg: "aggregation", core: "core" };

  function switchesOf(topo) {
    return [].concat(...topo.tiers.map((t) => t.names));
  }

  // the link's tier in link_gbps and /v1/links: "leaf" (leaf-spine, leaf-aggregation) or
  // "core" (aggregation-core)
  function tierOf(topo, lower) {
    return topo.leaves.has(lower) ? "leaf" : "core";
  }

  function capacityOf(topo, tier) { // bit/s; link_gbps is one speed or one per tier
    const s = topo.speeds;
    const gbps = typeof s === "number" ? s : s ? (s[tier] !== undefined ? s[tier] : s.leaf) : 0;
    return (gbps || 0) * 1e9;
  }

  const MARGIN = 20, BOX_H = 26;
  const PLANE_LABEL_H = 20; // above the planes' top row when there are several
  const HOST_DROP = 60, HOST_DROP_PLANES = 100; // leaves to hosts (several: lines fan out)

  // the columns a plane needs: its widest tier (three tiers: its pods' widths added)
  function podWeights(plane) {
    return plane.pods.map((p) => Math.max(p.leaves.length, p.aggs.length, 1));
  }

  function columnsOf(plane) {
    const widest = plane.kind === "two-tier" ? plane.leaves.length
      : podWeights(plane).reduce((a, b) => a + b, 0);
    return Math.max(widest, plane.tiers[0].names.length, 1);
  }

  // the y of a plane's rows when its top row is at y0: taller as the plane is wider
  function rowsOf(plane, n, y0) {
    if (plane.kind === "two-tier") return { yLeaf: y0 + Math.max(180, Math.min(320, 40 * n)) };
    const step = Math.max(150, Math.min(260, 30 * n));
    const yAgg = y0 + (plane.tiers[0].names.length ? step : 0);
    return { yAgg: yAgg, yLeaf: yAgg + step };
  }

  // x and y of one plane's switches (into pos) from its left edge x0 and top row y0; its
  // width, leaf row, narrowest leaf spacing and pods' bands (three tiers: one per pod, its
  // aggregation switches above its leaves, the cores across the top)
  function placePlane(plane, n, gap, x0, y0, pos) {
    const width = 2 * MARGIN + n * gap, inner = width - 2 * MARGIN;
    const rows = rowsOf(plane, n, y0);
    const out = { name: plane.name, x: x0, w: width, yLeaf: rows.yLeaf, leafGap: gap, bands: [] };
    const xOf = (i, count) => x0 + MARGIN + inner * (i + 0.5) / count;
    plane.tiers[0].names.forEach((s, j, top) => { pos[s] = [xOf(j, top.length), y0]; });
    if (plane.kind === "two-tier") {
      plane.leaves.forEach((l, i) => { pos[l] = [xOf(i, plane.leaves.length), rows.yLeaf]; });
      return out;
    }
    const weights = podWeights(plane);
    const total = weights.reduce((a, b) => a + b, 0) || 1;
    let left = x0 + MARGIN;
    plane.pods.forEach((p, k) => {
      const w = inner * weights[k] / total;
      p.aggs.forEach((a, j) => { pos[a] = [left + w * (j + 0.5) / p.aggs.length, rows.yAgg]; });
      p.leaves.forEach((l, i) => {
        pos[l] = [left + w * (i + 0.5) / p.leaves.length, rows.yLeaf];
      });
      if (p.leaves.length) out.leafGap = Math.min(out.leafGap, w / p.leaves.length);
      out.bands.push({ name: p.name, plane: plane.name, x: left, w: w,
                       y: rows.yAgg - BOX_H / 2 - 16 });
      left += w;
    });
    return out;
  }

  // x and y of every switch: the planes side by side (one spacing for all, so that the whole
  // keeps the width of one plane of as many switches), their leaves on one row; the hosts'
  // row and spacing; the planes' bands (several planes) and the pods' bands
  function layoutOf(topo) {
    const cols = topo.planes.map(columnsOf);
    const gap = Math.max(28, Math.min(110, 1400 / cols.reduce((a, b) => a + b, 0)));
    const several = topo.planes.length > 1;
    const depth = topo.planes.map((p, q) => rowsOf(p, cols[q], 0).yLeaf);
    const deepest = Math.max(...depth);
    const pos = {};
    let x0 = 0;
    const planes = topo.planes.map((p, q) => {
      const y0 = 30 + (several ? PLANE_LABEL_H : 0) + deepest - depth[q]; // shallow: lower
      const placed = placePlane(p, cols[q], gap, x0, y0, pos);
      x0 += placed.w;
      return placed;
    });
    const yLeaf = planes[0].yLeaf; // every plane's
    return { pos: pos, width: x0, gap: gap, leafGap: Math.min(...planes.map((x) => x.leafGap)),
             boxW: Math.min(64, gap * 0.8), boxH: BOX_H, yLeaf: yLeaf,
             yHost: yLeaf + (several ? HOST_DROP_PLANES : HOST_DROP),
             planes: several ? planes : [], bands: [].concat(...planes.map((x) => x.bands)) };
  }

  function describeKind(topo) {
    if (topo.planes.length > 1) return `Clos fabric of ${topo.planes.length} planes`;
    return topo.kind === "clos" ? "three-tier Clos fabric" : "leaf-spine fabric";
  }

  function drawFabric(topo) {
    const root = $("fabric");
    while (root.firstChild) root.removeChild(root.firstChild);
    state.linkEls = {};
    state.linkPairs = {};
    state.switchEls = {};
    const L = layoutOf(topo);
    const drawHosts = Object.keys(topo.hostLeaves).length <= MAX_DRAWN_HOSTS;
    const height = (drawHosts ? L.yHost + 30 : L.yLeaf + 30);
    root.setAttribute("viewBox", `0 0 ${L.width} ${height}`);
    root.setAttribute("height", String(Math.min(height, 700)));
    root.setAttribute("aria-label", describeKind(topo));
    drawBands(root, L);
    const gLinks = svg("g", { class: "links" }, root);
    state.idleLinks = svg("g", { class: "idle-links" }, gLinks); // drawn first:
    state.busyLinks = svg("g", { class: "busy-links" }, gLinks); // planned and down on top
    const gHosts = svg("g", { class: "hosts" }, root);
    const gSwitches = svg("g", { class: "switches" }, root);
    drawLinks(topo, L);
    if (drawHosts) drawHostsOf(topo, L, gHosts);
    drawSwitches(topo, L, gSwitches);
  }

  // the planes (when several) and the pods as labelled bands, behind everything
  function drawBands(root, L) {
    if (L.planes.length) {
      const gPlanes = svg("g", { class: "planes" }, root);
      for (const p of L.planes) {
        const g = svg("g", { class: "plane", "data-name": p.name }, gPlanes);
        svg("rect", { x: p.x + 4, y: 6, width: p.w - 8, height: L.yLeaf + L.boxH / 2 + 8,
                      rx: 8 }, g); // to below its pods' bands
        svg("text", { x: p.x + 12, y: 21 }, g).textContent = p.name;
      }
    }
    if (!L.bands.length) return;
    const gPods = svg("g", { class: "pods" }, root);
    for (const b of L.bands) {
      const g = svg("g", { class: "pod", "data-name": b.name, "data-plane": b.plane }, gPods);
      svg("rect", { x: b.x + 3, y: b.y, width: b.w - 6,
                    height: L.yLeaf + L.boxH / 2 + 8 - b.y, rx: 6 }, g);
      svg("text", { x: b.x + 9, y: b.y + 11 }, g).textContent = b.name;
    }
  }

  // both directions of every switch link of every plane, side by side
  function drawLinks(topo, L) {
    const pos = L.pos, boxH = L.boxH;
    const off = Math.max(1.5, Math.min(3.5, L.gap / 25));
    for (const [lower, upper] of topo.links) {
      if (!pos[lower] || !pos[upper]) continue;
      const [x1, y1] = [pos[lower][0], pos[lower][1] - boxH / 2];
      const [x2, y2] = [pos[upper][0], pos[upper][1] + boxH / 2];
      const dx = x2 - x1, dy = y2 - y1, len = Math.hypot(dx, dy) || 1;
      const nx = -dy / len * off, ny = dx / len * off; // normal: up link left, down right
      for (const [name, sign] of [[`${lower}->${upper}`, 1], [`${upper}->${lower}`, -1]]) {
        const line = svg("line", {
          class: "link", "data-link": name, "data-state": "up",
          x1: x1 + sign * nx, y1: y1 + sign * ny, x2: x2 + sign * nx, y2: y2 + sign * ny,
        }, state.idleLinks);
        svg("title", {}, line);
        state.linkEls[name] = line;
        state.linkPairs[name] = [lower, upper];
      }
    }
  }

  // The hosts in groups sharing every leaf, in the first plane's leaf order: each host is
  // drawn once, its group centred under its leaves (one plane: under its leaf; several:
  // between its leaf of every plane, so that no plane's hosts come first).
  function hostGroupsOf(topo, pos) {
    const groups = new Map(); // "l0_p0 l0_p1" -> { leaves, hosts }
    for (const h of Object.keys(topo.hostLeaves)) {
      const leaves = topo.hostLeaves[h].filter((l) => topo.leaves.has(l) && pos[l]);
      if (!leaves.length) continue;
      const key = leaves.join(" ");
      if (!groups.has(key)) groups.set(key, { leaves: leaves, hosts: [] });
      groups.get(key).hosts.push(h);
    }
    const rank = new Map(topo.planes[0].leaves.map((l, i) => [l, i]));
    const at = (g) => (rank.has(g.leaves[0]) ? rank.get(g.leaves[0]) : -1);
    return Array.from(groups.values()).sort((a, b) => at(a) - at(b)); // stable: hosts by name
  }

  // every host, linked to its leaf in each plane
  function drawHostsOf(topo, L, gHosts) {
    const pos = L.pos, yHost = L.yHost;
    const groups = hostGroupsOf(topo, pos);
    const most = Math.max(1, ...groups.map((g) => g.hosts.length));
    const hgap = Math.min(36, L.leafGap / most);
    const labels = hgap >= 32; // room for "h12_3" under each host
    for (const grp of groups) {
      const centre = grp.leaves.reduce((a, l) => a + pos[l][0], 0) / grp.leaves.length;
      grp.hosts.forEach((h, k) => {
        const x = centre + (k - (grp.hosts.length - 1) / 2) * hgap;
        for (const leaf of grp.leaves) {
          svg("line", { class: "host-link", "data-host": h, "data-leaf": leaf, x1: pos[leaf][0],
                        y1: L.yLeaf + L.boxH / 2, x2: x, y2: yHost - 5 }, gHosts);
        }
        const g = svg("g", { class: "host", "data-name": h }, gHosts);
        svg("circle", { cx: x, cy: yHost, r: 5 }, g);
        const ip = topo.hostIp[h]; // one address per plane: a list
        svg("title", {}, g).textContent = ip ? `${h} ${[].concat(ip).join(" ")}` : h;
        if (labels) {
          const t = svg("text", { x: x, y: yHost + 17 }, g);
          t.textContent = h;
        }
      });
    }
  }

  function drawSwitches(topo, L, gSwitches) {
    const pos = L.pos, boxW = L.boxW, boxH = L.boxH;
    for (const tier of topo.tiers) {
      const role = tier.role;
      for (const name of tier.names) {
        const [x, y] = pos[name];
        const g = svg("g", { class: `switch ${role}`, id: `switch-${name}`, "data-name": name,
                             "data-role": role }, gSwitches);
        svg("rect", { x: x - boxW / 2, y: y - boxH / 2, width: boxW, height: boxH, rx: 4 }, g);
        const t = svg("text", { x: x, y: y }, g);
        t.textContent = name;
        svg("title", {}, g);
        state.switchEls[name] = g;
      }
    }
  }

  function updateFabric(fab, links) {
    const declared = fab.declared;
    const topo = topologyOf(declared);
    const sig = JSON.stringify([topo.planes.map((p) => [p.name, p.tiers, p.pods]), topo.links,
      topo.hostLeaves]);
    if (sig !== state.signature) {
      drawFabric(topo);
      state.signature = sig;
    }
    const down = new Set(fab.links_down || []); // "lower-upper"
    for (const pair of declared.down || []) {
      if (pair.length === 2) down.add(`${pair[0]}-${pair[1]}`); // not one member of a bundle
    }
    const switchesDown = new Set(declared.down_switches || []);
    const byName = {};
    for (const l of (links && links.links) || []) byName[l.link] = l;
    for (const name in state.linkEls) {
      const line = state.linkEls[name];
      const [lower, upper] = state.linkPairs[name];
      const isDown = down.has(`${lower}-${upper}`) || switchesDown.has(lower) ||
        switchesDown.has(upper);
      const l = byName[name];
      const capacity = capacityOf(topo, l && l.tier ? l.tier : tierOf(topo, lower));
      const bps = l && l.measured ? l.measured.bps : null;
      const flows = l ? l.flows : 0;
      line.setAttribute("data-state", isDown ? "down" : "up");
      line.setAttribute("data-flows", String(flows));
      line.setAttribute("class", isDown ? "link down" : "link");
      const layer = isDown || flows > 0 ? state.busyLinks : state.idleLinks;
      if (line.parentNode !== layer) layer.appendChild(line);
      if (isDown) {
        line.style.stroke = "";
        line.style.strokeWidth = "2";
      } else {
        line.style.stroke = flowsColour(flows);
        const share = capacity > 0 && bps ? Math.min(1, bps / capacity) : 0;
        line.style.strokeWidth = String(1.5 + 6 * share);
      }
      const title = isDown ? `${name}: down`
        : `${name}: ${flows} planned flow(s), ${fmtBytes(l ? l.bytes : 0)} per step; ` +
          `measured ${fmtRate(bps)}` +
          (capacity > 0 && bps ? ` (${(100 * bps / capacity).toFixed(0)}% of the link)` : "");
      setText(line.firstChild, title);
    }
    const seen = fab.seen || {};
    for (const name in state.switchEls) {
      const g = state.switchEls[name];
      const s = seen[name];
      const online = s && s.connected;
      const role = g.getAttribute("data-role");
      g.setAttribute("class", `switch ${role}` + (online ? "" : " offline") +
        (switchesDown.has(name) ? " down" : ""));
      g.setAttribute("data-state", !s ? "unseen" : !s.connected ? "disconnected"
        : s.provisioned ? "provisioned" : "connected");
      const rules = s && s.rules !== undefined && s.rules !== null ? `, ${s.rules} rules` : "";
      setText(g.lastChild, `${name} (${ROLE_NAMES[role] || role}): ` +
        `${g.getAttribute("data-state")}${rules}` +
        (switchesDown.has(name) ? ", declared down" : "") +
        (s && s.ports_down && s.ports_down.length ? `, ports down ${s.ports_down.join(" ")}` : ""));
    }
    return topo;
  }

  // one plane: "8 spines × 16 leaves", "k=4 fat-tree: 4 cores, 8 aggregation switches,
  // 8 leaves" or "three-tier Clos, 3 pods: …"
  function describePlane(p) {
    if (p.kind === "two-tier") {
      return `${p.tiers[0].names.length} spines × ${p.leaves.length} leaves`;
    }
    const pods = p.pods, groups = p.groups;
    const cores = p.tiers[0].names.length, aggs = p.tiers[1].names.length;
    const k = pods.length, half = k / 2;
    const fatTree = k >= 2 && k % 2 === 0 && groups.length === half &&
      pods.every((x) => x.leaves.length === half && x.aggs.length === half) &&
      groups.every((g) => g.length === half);
    return (fatTree ? `k=${k} fat-tree: ` : `three-tier Clos, ${k} pods: `) +
      `${cores} cores, ${aggs} aggregation switches, ${p.leaves.length} leaves`;
  }

  // "8 spines × 16 leaves × 64 hosts", "k=4 fat-tree: 4 cores, 8 aggregation switches,
  // 8 leaves, 16 hosts" or "2 planes, each k=4 fat-tree: …, 8 leaves; 16 hosts on every plane"
  function describeTopology(topo) {
    const hosts = Object.keys(topo.hostLeaves).length;
    const shapes = topo.planes.map(describePlane);
    if (shapes.length === 1) {
      return shapes[0] + (topo.kind === "two-tier" ? " × " : ", ") + `${hosts} hosts`;
    }
    const same = shapes.every((x) => x === shapes[0]);
    return `${shapes.length} planes, ` + (same ? `each ${shapes[0]}` : shapes.join(" + ")) +
      `; ${hosts} hosts on every plane`;
  }

  function describeSpeeds(topo) {
    const s = topo.speeds;
    if (typeof s === "number" || !s) return `${fmtRate(capacityOf(topo, "leaf"))} links`;
    const leaf = capacityOf(topo, "leaf"), core = capacityOf(topo, "core");
    const cores = topo.planes.some((p) => p.kind === "clos");
    if (!cores || leaf === core) return `${fmtRate(leaf)} links`;
    return `${fmtRate(leaf)} leaf links, ${fmtRate(core)} core links`;
  }

  const KNOWN_FABRIC_KEYS = new Set(["declared", "seen", "links_down", "events", "ready",
    "missing_switches", "ports_not_up", "unknown_switches", "unroutable_pairs", "discovery"]);

  function updateProblems(fab, topo) {
    const middle = topo && topo.kind === "clos" ? "path" : "spine";
    const items = [];
    for (const s of fab.missing_switches || []) items.push(`switch ${s} is not connected`);
    for (const s of fab.unknown_switches || []) items.push(`unknown switch ${s}`);
    for (const p of fab.ports_not_up || []) {
      items.push(`${p.switch} port ${p.port} (to ${p.peer}) is not up`);
    }
    for (const p of fab.unroutable_pairs || []) {
      items.push(p.src_leaf ? `no alive ${middle} between ${p.src_leaf} and ${p.dst_leaf}` +
        (p.flows ? ` (${p.flows} flows)` : "") : `unroutable: ${JSON.stringify(p)}`);
    }
    const disc = fab.discovery || {};
    const what = disc.mode === "checking the declared fabric" ? "disagrees" : "wiring";
    for (const p of disc.wiring_problems || []) { // cabling that differs from the fabric
      items.push(`${what}: ${p.kind ? p.kind + ": " : ""}${p.detail || JSON.stringify(p)}`);
    }
    for (const k of Object.keys(fab)) { // reports this page does not know yet (e.g. wiring)
      const v = fab[k];
      if (!KNOWN_FABRIC_KEYS.has(k) && Array.isArray(v) && v.length) {
        for (const x of v) items.push(`${k}: ${typeof x === "string" ? x : JSON.stringify(x)}`);
      }
    }
    const ul = $("problems");
    ul.textContent = "";
    for (const text of items.slice(0, 50)) {
      const li = document.createElement("li");
      li.textContent = text;
      ul.appendChild(li);
    }
  }

  // ---- jobs ---------------------------------------------------------------------------
  // Bytes one flow of the job moves per All-Reduce (ring: 2(n-1) steps of bytes/n), in the
  // order of the job's routes (ring by ring, rank by rank; explicit flows in order).
  function bytesPerIteration(job) {
    if (job.flows) return job.flows.map((f) => f.bytes);
    const rings = job.rings || (job.ranks ? [job.ranks] : []);
    const out = [];
    for (const ring of rings) {
      const n = ring.length;
      for (let i = 0; i < n; i++) out.push(2 * (n - 1) * job.bytes / n);
    }
    return out;
  }

  // The hops a route may take: the "a->b" steps of its path ({"path": [leaf, ..., leaf]}, or
  // split parts; every fabric), or its spine where a route names no path (before 0.3).
  function plannedHops(r) {
    const parts = r.split ? r.split : [r];
    const out = new Set();
    for (const p of parts) {
      if (!p.path) {
        out.add(p.spine);
        continue;
      }
      for (let k = 0; k + 1 < p.path.length; k++) out.add(`${p.path[k]}->${p.path[k + 1]}`);
    }
    return out;
  }

  // Bytes a route's rules counted and whether every counted entry sent them along the plan:
  // an entry per switch that forwards the flow, {"switch", "next", "bytes"} (two tiers: one,
  // at the source leaf; {"spine", "bytes"} before 0.3); the flow's bytes are those of the
  // entries at its source leaf (the others count the same packets again).
  function routeBytes(r) {
    const planned = plannedHops(r);
    const first = r.path || (r.split && r.split[0] && r.split[0].path);
    const source = first ? first[0] : null;
    let bytes = 0, ok = true;
    for (const p of r.measured) {
      const clos = p.next !== undefined;
      if (!clos || p.switch === source) bytes += p.bytes || 0;
      if (p.bytes > 0 && !planned.has(clos ? `${p.switch}->${p.next}` : p.spine)) ok = false;
    }
    return { bytes: bytes, ok: ok };
  }

  function measuredFigures(view, now) {
    const perIter = bytesPerIteration(view.job || {});
    const hist = state.samples[view.number] || (state.samples[view.number] = {});
    let total = 0, onPlan = 0, interLeaf = 0, slowest = null, allActive = true;
    (view.routes || []).forEach((r, i) => {
      if (!r.measured || !r.measured.length) return; // intra-leaf: no ingress rule to count
      interLeaf += 1;
      const { bytes, ok } = routeBytes(r);
      total += bytes;
      if (bytes > 0 && ok) onPlan += 1;
      const h = hist[i] || (hist[i] = []);
      h.push([now, bytes]);
      while (h.length > 1 && now - h[0][0] > RATE_WINDOW_S) h.shift();
      const dt = h[h.length - 1][0] - h[0][0];
      const rate = dt > 0 ? (h[h.length - 1][1] - h[0][1]) / dt : 0; // bytes per second
      if (!(rate > 0)) allActive = false;
      else if (perIter[i]) {
        const t = perIter[i] / rate;
        slowest = slowest === null ? t : Math.max(slowest, t);
      }
    });
    return { total: total, onPlan: onPlan, interLeaf: interLeaf,
             measuredS: allActive && interLeaf ? slowest : null,
             idle: interLeaf > 0 && !allActive };
  }

  function updateJobs(list, details, now) {
    const tbody = $("jobs").tBodies[0];
    const rows = {};
    for (const tr of Array.from(tbody.rows)) rows[tr.getAttribute("data-job")] = tr;
    const detailOf = {};
    for (const d of details) if (d) detailOf[d.id] = d;
    const keep = new Set();
    list.forEach((j, idx) => {
      keep.add(j.id);
      let tr = rows[j.id];
      if (!tr) {
        tr = document.createElement("tr");
        tr.className = "job";
        tr.setAttribute("data-job", j.id);
        for (let k = 0; k < 9; k++) tr.appendChild(document.createElement("td"));
      }
      if (tbody.rows[idx] !== tr) tbody.insertBefore(tr, tbody.rows[idx] || null);
      const d = detailOf[j.id];
      const m = d ? measuredFigures(d, now) : null;
      const cells = [j.id, j.algorithm, j.mode, String(j.flows),
        d ? fmtSeconds(d.ideal_s) : "…", d ? fmtSeconds(d.predicted_allreduce_s) : "…",
        m ? (m.measuredS !== null ? fmtSeconds(m.measuredS) : m.idle ? "idle" : "—") : "…",
        m ? fmtBytes(m.total) : "…", m ? `${m.onPlan}/${m.interLeaf}` : "…"];
      cells.forEach((c, k) => setText(tr.cells[k], c));
      const slow = d && m && m.measuredS !== null && m.measuredS > 1.15 * d.predicted_allreduce_s;
      tr.cells[6].className = slow ? "slow" : "";
      tr.cells[6].title = d && d.unroutable_flows ? `${d.unroutable_flows} flows unroutable` : "";
    });
    for (const id in rows) if (!keep.has(id)) tbody.removeChild(rows[id]);
    const numbers = new Set(details.filter(Boolean).map((d) => String(d.number)));
    for (const n of Object.keys(state.samples)) if (!numbers.has(n)) delete state.samples[n];
    $("jobs-empty").hidden = list.length > 0;
    setText($("jobs-summary"), list.length ? `(${list.length} running)` : "");
  }

  // ---- events -------------------------------------------------------------------------
  function describeEvent(e) {
    if (e.category === "security") return describeAlarm(e);
    const parts = [e.cause || "change"];
    if (e.links_down && e.links_down.length) parts.push(`down: ${e.links_down.join(", ")}`);
    if (e.links_up && e.links_up.length) parts.push(`up again: ${e.links_up.join(", ")}`);
    if (e.replanned && e.replanned.length) parts.push(`re-planned: ${e.replanned.join(", ")}`);
    if (e.moved_flows !== undefined) parts.push(`${e.moved_flows} flows moved`);
    if (e.rules) parts.push(`rules +${e.rules.added || 0} −${e.rules.removed || 0}`);
    if (e.unroutable_flows) parts.push(`${e.unroutable_flows} flows unroutable`);
    if (e.error) parts.push(`error: ${e.error}`);
    if (e.recovery_ms !== undefined) parts.push(`${e.recovery_ms} ms`);
    return parts.join(" · ");
  }

  // the topology guard: refused LLDP probes and address claims, addresses moved
  function describeAlarm(e) {
    const where = e.switch ? `${e.switch} port ${e.port}` : "";
    return [e.kind, where, e.message,
      e.frames > 1 ? `${e.frames} frames` : ""].filter((x) => x).join(" · ");
  }

  function updateSecurity(sec) {
    const ol = $("security");
    ol.textContent = "";
    const recent = ((sec && sec.recent) || []).slice().reverse();
    for (const e of recent) {
      const li = document.createElement("li");
      li.className = "event alarm" + (e.kind === "host_moved" ? " moved" : "");
      li.setAttribute("data-kind", e.kind);
      const t = document.createElement("time");
      t.textContent = e.time ? fmtTime(e.time) : "";
      li.appendChild(t);
      li.appendChild(document.createTextNode(describeAlarm(e)));
      ol.appendChild(li);
    }
    $("security-empty").hidden = recent.length > 0;
    const counts = (sec && sec.counts) || {};
    const seen = Object.keys(counts).filter((k) => counts[k] > 0);
    setText($("security-summary"), seen.length
      ? "(" + seen.map((k) => `${k} ${counts[k]}`).join(", ") + ")" : "");
  }

  function updateEvents(events) {
    const ol = $("events");
    ol.textContent = "";
    const recent = (events || []).slice().reverse();
    for (const e of recent) {
      const li = document.createElement("li");
      li.className = "event" + (e.category === "security" ? " alarm"
        : e.links_down && e.links_down.length ? " failure"
        : e.links_up && e.links_up.length ? " repair" : "");
      const t = document.createElement("time");
      t.textContent = e.time ? fmtTime(e.time) : "";
      li.appendChild(t);
      li.appendChild(document.createTextNode(describeEvent(e)));
      ol.appendChild(li);
    }
    $("events-empty").hidden = recent.length > 0;
  }

  // ---- polling ------------------------------------------------------------------------
  function setStatus(cls, text) {
    const el = $("status");
    el.className = "status " + cls;
    setText(el, text);
  }

  async function poll() {
    if (state.busy) return;
    state.busy = true;
    try {
      const fabric = await getJSON("v1/fabric");
      if (fabric.status !== 200 || !fabric.body) {
        throw new Error(`GET /v1/fabric answered ${fabric.status}`);
      }
      const fab = fabric.body;
      const declared = fab.declared;
      let topo = null;
      const links = declared ? await getJSON("v1/links") : null;
      const jobs = await getJSON("v1/jobs");
      const list = jobs.status === 200 && jobs.body ? jobs.body.jobs : [];
      const details = await Promise.all(list.slice(0, MAX_JOB_DETAILS).map(async (j) => {
        const r = await getJSON("v1/jobs/" + encodeURIComponent(j.id));
        return r.status === 200 ? r.body : null; // deleted meanwhile
      }));
      const now = Date.now() / 1000;
      $("fabric-empty").hidden = !!declared;
      $("fabric").style.display = declared ? "" : "none";
      const speed = fab.discovery && fab.discovery.link_speed;
      if (declared) {
        topo = updateFabric(fab, links && links.status === 200 ? links.body : null);
        const s = links && links.status === 200 ? links.body.summary : null;
        setText($("fabric-summary"), `(${describeTopology(topo)}, ${describeSpeeds(topo)}` +
          (speed && speed.source ? ` (${speed.source})` : "") +
          (s ? `; busiest link: ${s.max_link_load} planned flows (${s.links_at_max} links)` : "") +
          (fab.discovery && fab.discovery.mode ? `; ${fab.discovery.mode}` : "") + ")");
      }
      updateProblems(fab, topo);
      const onPlan = $("on-plan");
      if (onPlan) {
        setText(onPlan, topo && topo.kind === "clos" ? "on planned path" : "on planned spine");
        onPlan.title = topo && topo.kind === "clos"
          ? "flows whose counted bytes went along their planned path"
          : "flows whose counted bytes went to their planned spine";
      }
      updateJobs(list, details, now);
      updateEvents(fab.events);
      updateSecurity(fab.discovery && fab.discovery.security);
      const names = topo ? switchesOf(topo) : [];
      const switches = names.length;
      const provisioned = names.filter((sw) => fab.seen[sw] && fab.seen[sw].provisioned).length;
      // a declared fabric that disagrees with what is seen says so in the status line
      const disc = fab.discovery || {};
      const wrong = disc.mode === "checking the declared fabric"
        ? (disc.wiring_problems || []).length : 0;
      const disagrees = wrong ? `; the declared fabric disagrees with what is seen: ${wrong} ` +
        `problem${wrong > 1 ? "s" : ""} (listed below)` : "";
      if (fab.ready && !wrong) setStatus("ok", `ready: ${switches} switches provisioned`);
      else if (fab.ready) setStatus("warn", `ready: ${switches} switches provisioned${disagrees}`);
      else if (!declared) setStatus("warn", "no fabric yet");
      else setStatus("warn", `not ready: ${provisioned}/${switches} switches provisioned${disagrees}`);
      setText($("updated"), "updated " + new Date().toTimeString().slice(0, 8));
      document.body.setAttribute("data-polls", String(
        Number(document.body.getAttribute("data-polls") || 0) + 1));
    } catch (e) {
      setStatus("bad", "controller unreachable: " + e.message);
    } finally {
      state.busy = false;
    }
  }

  poll();
  setInterval(poll, POLL_MS);
})();
