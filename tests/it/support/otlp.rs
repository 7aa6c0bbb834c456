//! Helpers of the observability tests: an in-process OTLP receiver drained continuously
//! (the fake collector's channel holds only 64 spans) and span-attribute access.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_opentelemetry_collector::{ExportedSpan, FakeCollectorServer};
use tokio::sync::watch;

/// A fake OTLP/gRPC collector whose spans are collected in the background.
pub struct Collector {
    pub endpoint: String,
    spans: Arc<Mutex<Vec<ExportedSpan>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    pub async fn start() -> Collector {
        let mut server = FakeCollectorServer::start()
            .await
            .map_err(|e| e.to_string())
            .expect("the fake collector starts on loopback");
        let endpoint = server.endpoint();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = watch::channel(false);
        let sink = spans.clone();
        let task = tokio::spawn(async move {
            loop {
                let got = server.exported_spans(1, Duration::from_millis(100)).await;
                sink.lock().unwrap().extend(got);
                if *stopped.borrow_and_update() {
                    // One last drain after the stop request.
                    let got = server.exported_spans(1, Duration::from_millis(200)).await;
                    sink.lock().unwrap().extend(got);
                    server.abort();
                    return;
                }
            }
        });
        Collector {
            endpoint,
            spans,
            stop,
            task,
        }
    }

    /// Waits until no new span arrived for a while (the run has flushed), then stops.
    pub async fn finish(self) -> Vec<ExportedSpan> {
        let mut last = usize::MAX;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let n = self.spans.lock().unwrap().len();
            if n == last || tokio::time::Instant::now() > deadline {
                break;
            }
            last = n;
        }
        let _ = self.stop.send(true);
        let _ = self.task.await;
        std::mem::take(&mut *self.spans.lock().unwrap())
    }
}

/// Each exported `problem` span's (problem id, trace id).
pub fn problem_traces(spans: &[ExportedSpan]) -> impl Iterator<Item = (String, String)> + '_ {
    spans.iter().filter(|s| s.name == "problem").map(|p| {
        (
            attr(p, "tmas.problem_id").expect("problem id"),
            p.trace_id.clone(),
        )
    })
}

/// An attribute's value as text: the fake collector stores the protobuf `Debug` form,
/// e.g. `Some(AnyValue { value: Some(StringValue("p1")) })`.
pub fn attr(span: &ExportedSpan, key: &str) -> Option<String> {
    let raw = span.attributes.get(key)?;
    for kind in ["StringValue(\"", "IntValue(", "DoubleValue(", "BoolValue("] {
        if let Some((_, rest)) = raw.split_once(kind) {
            let end = if kind.ends_with('"') { "\")" } else { ")" };
            return rest.split_once(end).map(|(v, _)| v.to_owned());
        }
    }
    Some(raw.clone())
}

/// An attribute's OTLP value type and value, decoded from the protobuf `AnyValue` the
/// collector received (its `Debug` form).
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    Int(i64),
    Double(f64),
    Str(String),
    Bool(bool),
    /// Arrays and anything else, as received.
    Other(String),
}

/// The typed value of attribute `key`.
pub fn typed(span: &ExportedSpan, key: &str) -> Option<Typed> {
    let raw = span.attributes.get(key)?;
    let inner = |kind: &str| {
        raw.split_once(&format!("Some({kind}("))
            .and_then(|(_, rest)| rest.split_once(")) })"))
            .map(|(v, _)| v.to_owned())
    };
    let parsed = if let Some(v) = inner("IntValue") {
        v.parse().ok().map(Typed::Int)
    } else if let Some(v) = inner("DoubleValue") {
        v.parse().ok().map(Typed::Double)
    } else if let Some(v) = inner("BoolValue") {
        v.parse().ok().map(Typed::Bool)
    } else {
        inner("StringValue").map(|v| Typed::Str(v.trim_matches('"').to_owned()))
    };
    Some(parsed.unwrap_or_else(|| Typed::Other(raw.clone())))
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
