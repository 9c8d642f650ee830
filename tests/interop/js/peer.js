'use strict';
// js peer: the @grpc/grpc-js side of the interop suite (tests/interop/run.py drives it).
//
//   node peer.js server SOCK          serve edgegpu.interop.Test on the unix socket SOCK
//   node peer.js client SOCK CHECK    run one client check; prints "ok: ..." or why it failed

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const def = protoLoader.loadSync(path.join(__dirname, '..', 'proto', 'interop.proto'), {
	keepCase: true,
	longs: Number,
	enums: Number,
	defaults: true,
});
const Test = grpc.loadPackageDefinition(def).edgegpu.interop.Test;

const ERR_MSG = 'bad r\u00e9sum\u00e9: 100% done\t[x]';
const BIG = 3 << 20;
const TAG_OPEN = -2;

function scale(ms) {
	const f = parseFloat(process.env.INTEROP_TIMEOUT_SCALE || '1');
	return f > 1 ? ms * f : ms;
}

function pattern(n) {
	const b = Buffer.alloc(n);
	for (let i = 0; i < n; i++)
		b[i] = i % 251;
	return b;
}

function isPattern(b) {
	for (let i = 0; i < b.length; i++)
		if (b[i] !== i % 251)
			return false;
	return true;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* --- server --- */

function runServer(sock) {
	try {
		require('fs').unlinkSync(sock);
	} catch (e) {
		/* no stale file */
	}
	const st = { open: 0, peak: 0, calls: 0, tags: new Map() };
	const begin = (tag) => {
		st.open++;
		st.calls++;
		st.peak = Math.max(st.peak, st.open);
		if (tag)
			st.tags.set(tag, TAG_OPEN);
	};
	let ended = (tag, code) => {
		st.open--;
		if (tag)
			st.tags.set(tag, code);
	};
	const endedCode = (call) => {
		const d = call.getDeadline();
		const t = d instanceof Date ? d.getTime() : d;
		return Number.isFinite(t) && t <= Date.now() + 5 ? grpc.status.DEADLINE_EXCEEDED
			: grpc.status.CANCELLED;
	};
	// Runs @fn(code) once, when the call ends for whatever reason.
	const once = (fn) => {
		let done = false;
		return (code) => {
			if (!done) {
				done = true;
				fn(code);
			}
		};
	};

	const impl = {
		Unary(call, callback) {
			const req = call.request;
			begin(req.tag);
			const fin = once((code) => ended(req.tag, code));
			const answer = () => {
				if (req.status_code) {
					fin(req.status_code);
					callback({ code: req.status_code, details: req.status_message });
					return;
				}
				fin(grpc.status.OK);
				callback(null, {
					payload: pattern(req.response_size),
					received: req.payload.length,
					received_ok: isPattern(req.payload),
				});
			};
			if (!req.sleep_ms) {
				answer();
				return;
			}
			const t = setTimeout(answer, req.sleep_ms);
			call.on('cancelled', () => {
				clearTimeout(t);
				fin(endedCode(call));
			});
		},
		Stream(call) {
			const req = call.request;
			begin(req.tag);
			const fin = once((code) => ended(req.tag, code));
			let seq = 0;
			let timer = null;
			call.on('cancelled', () => {
				clearTimeout(timer);
				fin(endedCode(call));
			});
			const next = () => {
				if (seq < req.count) {
					call.write({ seq: seq, payload: pattern(req.size) });
					seq++;
					timer = setTimeout(next, req.interval_ms);
				} else if (!req.hold_open) {
					fin(grpc.status.OK);
					call.end();
				}
			};
			next();
		},
		Stats(call, callback) {
			begin('');
			const r = { streams: st.open, streams_peak: st.peak, calls: st.calls, tag_status: -1 };
			if (st.tags.has(call.request.tag))
				r.tag_status = st.tags.get(call.request.tag);
			ended('', 0);
			callback(null, r);
		},
	};
	const server = new grpc.Server();
	server.addService(Test.service, impl);
	server.bindAsync('unix:' + sock, grpc.ServerCredentials.createInsecure(), (err) => {
		if (err) {
			console.error('bind:', err.message);
			process.exit(1);
		}
		console.log('grpc-js server listening on', sock);
	});
	const stop = () => {
		server.forceShutdown();
		process.exit(0);
	};
	process.on('SIGTERM', stop);
	process.on('SIGINT', stop);
}

/* --- client --- */

class Failed extends Error {}

function unary(c, req, timeoutMs) {
	return new Promise((resolve, reject) => {
		c.Unary(req, { deadline: Date.now() + timeoutMs }, (err, resp) =>
			err ? reject(err) : resolve(resp));
	});
}

function stats(c, tag) {
	return new Promise((resolve, reject) => {
		c.Stats({ tag: tag || '' }, { deadline: Date.now() + scale(10000) }, (err, resp) =>
			err ? reject(err) : resolve(resp));
	});
}

// Reads a server stream; next() resolves with the next message (null at the end) or rejects.
function reader(call) {
	const q = [];
	const waiters = [];
	let end = null;
	const push = (item) => {
		if (waiters.length)
			waiters.shift()(item);
		else
			q.push(item);
	};
	call.on('data', (m) => push({ m }));
	call.on('end', () => push({ m: null }));
	call.on('error', (e) => push({ e }));
	return {
		next() {
			return new Promise((resolve) => {
				if (q.length)
					resolve(q.shift());
				else
					waiters.push(resolve);
			}).then((item) => {
				if (item.e)
					throw item.e;
				return item.m;
			});
		},
	};
}

function newTag(check) {
	return `js-${check}-${process.pid}-${Math.floor(Math.random() * 1e12)}`;
}

function verifyUnary(r, sent, want) {
	if (r.payload.length !== want || !isPattern(r.payload))
		throw new Failed(`response payload: ${r.payload.length} bytes, want ${want}`);
	if (r.received !== sent || !r.received_ok)
		throw new Failed(`server received ${r.received} bytes (pattern ok ${r.received_ok}), sent ${sent}`);
}

async function waitTag(c, tag, ...want) {
	const end = Date.now() + scale(5000);
	let last = -1;
	while (Date.now() < end) {
		last = (await stats(c, tag)).tag_status;
		if (want.includes(last))
			return last;
		if (last >= 0)
			throw new Failed(`server closed the call with status ${last}, want ${want}`);
		await sleep(50);
	}
	throw new Failed(`server never closed the call (tag status ${last})`);
}

const checks = {
	async unary(c) {
		const t0 = Date.now();
		verifyUnary(await unary(c, { payload: pattern(1000), response_size: 1000 }, scale(10000)),
			1000, 1000);
		return `1000 bytes each way in ${Date.now() - t0} ms`;
	},
	async error(c) {
		try {
			await unary(c, { status_code: 3, status_message: ERR_MSG }, scale(10000));
		} catch (e) {
			if (e.code === grpc.status.INVALID_ARGUMENT && e.details === ERR_MSG)
				return `code=${e.code} message=${JSON.stringify(e.details)}`;
			throw new Failed(`got code=${e.code} message=${JSON.stringify(e.details)}, want 3 ${JSON.stringify(ERR_MSG)}`);
		}
		throw new Failed('the call succeeded');
	},
	async big(c) {
		const t0 = Date.now();
		verifyUnary(await unary(c, { payload: pattern(BIG), response_size: BIG }, scale(20000)),
			BIG, BIG);
		return `3 MiB each way in ${Date.now() - t0} ms`;
	},
	async stream(c) {
		const t0 = Date.now();
		const r = reader(c.Stream({ count: 3, interval_ms: 1000, size: 64 },
			{ deadline: Date.now() + scale(20000) }));
		const at = [];
		for (;;) {
			const m = await r.next();
			if (m === null)
				break;
			if (m.seq !== at.length || m.payload.length !== 64 || !isPattern(m.payload))
				throw new Failed(`message ${at.length}: seq ${m.seq}, ${m.payload.length} bytes`);
			at.push(Date.now() - t0);
		}
		if (at.length !== 3)
			throw new Failed(`got ${at.length} messages, want 3`);
		for (let i = 1; i < 3; i++)
			if (at[i] - at[i - 1] < 900)
				throw new Failed(`messages ${i - 1} and ${i} only ${at[i] - at[i - 1]} ms apart`);
		return `3 messages at ${at.join(', ')} ms, then OK`;
	},
	async cancel(c) {
		const tag = newTag('cancel');
		const call = c.Stream({ count: 1000000, interval_ms: 50, size: 16, hold_open: true, tag });
		const r = reader(call);
		await r.next();
		await r.next();
		call.cancel();
		try {
			await r.next();
			throw new Failed('stream went on after cancel');
		} catch (e) {
			if (e instanceof Failed)
				throw e;
			if (e.code !== grpc.status.CANCELLED)
				throw new Failed(`after cancel: code ${e.code} ${e.details}`);
		}
		return `server closed the stream with status ${await waitTag(c, tag, 1)}`;
	},
	async concurrent(c) {
		const s0 = await stats(c);
		if (s0.streams_peak >= 101)
			throw new Failed(`server not fresh: peak already ${s0.streams_peak}`);
		const tag = newTag('concurrent');
		const call = c.Stream({ count: 1000000, interval_ms: 100, size: 16, hold_open: true, tag });
		const r = reader(call);
		await r.next();
		const res = await Promise.allSettled(Array.from({ length: 100 }, () =>
			unary(c, { payload: pattern(10), response_size: 10, sleep_ms: 500 }, scale(20000))
				.then((resp) => verifyUnary(resp, 10, 10))));
		const bad = res.filter((x) => x.status === 'rejected');
		if (bad.length)
			throw new Failed(`${bad.length} of 100 unary calls failed, first: ${bad[0].reason.message}`);
		await r.next();
		const s1 = await stats(c);
		if (s1.streams_peak < 101)
			throw new Failed(`server peak of open streams ${s1.streams_peak}, want >= 101`);
		call.cancel();
		await waitTag(c, tag, 1);
		return `100 unary ok beside an open stream; peak ${s0.streams_peak} -> ${s1.streams_peak}`;
	},
	async deadline(c) {
		const tag = newTag('deadline');
		const t0 = Date.now();
		let el;
		try {
			await unary(c, { sleep_ms: 3000, tag }, 300);
			throw new Failed('the call succeeded');
		} catch (e) {
			if (e instanceof Failed)
				throw e;
			el = Date.now() - t0;
			if (e.code !== grpc.status.DEADLINE_EXCEEDED)
				throw new Failed(`got code ${e.code} ${e.details}, want DEADLINE_EXCEEDED`);
		}
		if (el > scale(2000))
			throw new Failed(`DEADLINE_EXCEEDED only after ${el} ms`);
		const code = await waitTag(c, tag, 1, 4);
		return `DEADLINE_EXCEEDED after ${el} ms; server closed the call with ${code}`;
	},
};

async function runClient(sock, name) {
	const fn = checks[name];
	if (!fn) {
		console.log(`unknown check ${name}`);
		return 2;
	}
	const c = new Test('unix:' + sock, grpc.credentials.createInsecure());
	try {
		await new Promise((resolve, reject) =>
			c.waitForReady(Date.now() + scale(10000), (e) => (e ? reject(e) : resolve())));
		console.log('ok:', await fn(c));
		return 0;
	} catch (e) {
		console.log(e instanceof Failed ? e.message : `rpc error: ${e.code} ${e.details || e.message}`);
		return 1;
	} finally {
		c.close();
	}
}

function main() {
	const a = process.argv.slice(2);
	if (a.length >= 2 && a[0] === 'server')
		return runServer(a[1]);
	if (a.length >= 3 && a[0] === 'client')
		return runClient(a[1], a[2]).then((rc) => process.exit(rc));
	console.error('usage: node peer.js server SOCK | client SOCK CHECK');
	process.exit(2);
}

main();
