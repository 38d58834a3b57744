//! The cloud stand-in's EC2 endpoint: every call goes on to moto, except a
//! RunInstances of an instance type the test has run out of, which gets
//! EC2's `InsufficientInstanceCapacity` error as AWS documents it, and the
//! placement-group calls (CreatePlacementGroup, DescribePlacementGroups,
//! DeletePlacementGroup), answered here as AWS documents them. moto never
//! runs out of capacity and has no placement groups, so these answers are
//! a recorded contract. The front remembers the group each RunInstances
//! named (`Placement.GroupName`), which moto ignores.

use std::collections::HashSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// The headers a signed EC2 call carries that moto reads (the region is in the credential scope).
const FORWARDED: [&str; 4] =
    ["Authorization", "Content-Type", "X-Amz-Date", "X-Amz-Security-Token"];

/// An EC2 endpoint in front of moto.
pub struct Ec2Front {
    url: String,
    out_of: Arc<Mutex<HashSet<String>>>,
    groups: Arc<Mutex<Groups>>,
}

/// The placement groups the front holds, and the launches into each.
#[derive(Default)]
struct Groups {
    /// Each group's name and how many RunInstances named it, in creation order.
    held: Vec<(String, usize)>,
}

impl Ec2Front {
    /// Listens on `host`, forwarding to moto at `moto`.
    pub fn start(host: &str, moto: &str) -> Self {
        let server = tiny_http::Server::http(format!("{host}:0"))
            .unwrap_or_else(|e| panic!("the EC2 endpoint: {e}"));
        let url = format!("http://{}", server.server_addr().to_ip().expect("an IP listener"));
        let out_of: Arc<Mutex<HashSet<String>>> = Arc::default();
        let groups: Arc<Mutex<Groups>> = Arc::default();
        let (refusing, held, moto) = (out_of.clone(), groups.clone(), moto.to_string());
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                let (refusing, held, moto) = (refusing.clone(), held.clone(), moto.clone());
                std::thread::spawn(move || answer(request, &refusing, &held, &moto));
            }
        });
        Self { url, out_of, groups }
    }

    /// The placement groups that exist, each with the launches that named it.
    pub fn placement_groups(&self) -> Vec<(String, usize)> {
        self.groups.lock().unwrap().held.clone()
    }

    /// The URL EC2 clients are pointed at (`AWS_ENDPOINT_URL_EC2`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// From now, launches of `instance_type` find no capacity (`out` true) or do again.
    pub fn out_of_capacity(&self, instance_type: &str, out: bool) {
        let mut set = self.out_of.lock().unwrap();
        if out {
            set.insert(instance_type.to_string());
        } else {
            set.remove(instance_type);
        }
    }
}

fn answer(
    mut request: tiny_http::Request,
    out_of: &Mutex<HashSet<String>>,
    groups: &Mutex<Groups>,
    moto: &str,
) {
    let mut body = String::new();
    let _ = request.as_reader().read_to_string(&mut body);
    // The form's values here are plain (an action name, an instance type, a
    // group name): no decoding is needed to match them.
    let pairs: Vec<&str> = body.split('&').collect();
    let value = |key: &str| pairs.iter().find_map(|p| p.strip_prefix(key)?.strip_prefix('='));
    if let Some((status, text)) = placement(&pairs, value("GroupName"), groups) {
        return respond(request, status, text);
    }
    if let (true, Some(group)) =
        (pairs.contains(&"Action=RunInstances"), value("Placement.GroupName"))
    {
        let mut groups = groups.lock().unwrap();
        if let Some(held) = groups.held.iter_mut().find(|(name, _)| name == group) {
            held.1 += 1;
        }
    }
    let refused = pairs.contains(&"Action=RunInstances")
        && out_of
            .lock()
            .unwrap()
            .iter()
            .any(|t| pairs.contains(&format!("InstanceType={t}").as_str()));
    let (status, text) = if refused {
        let kind = pairs.iter().find_map(|p| p.strip_prefix("InstanceType=")).unwrap_or_default();
        (
            500,
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>InsufficientInstanceCapacity</Code>\
                 <Message>We currently do not have sufficient {kind} capacity in the Availability Zone you requested (us-east-1a). \
                 Our system will be working on provisioning additional capacity. You can currently get {kind} capacity by not \
                 specifying an Availability Zone in your request or choosing us-east-1b, us-east-1c.</Message></Error></Errors>\
                 <RequestID>5f2a0c6e-0000-4000-8000-tuneline</RequestID></Response>"
            ),
        )
    } else {
        forward(&request, &body, moto)
    };
    respond(request, status, text);
}

/// The placement-group calls, answered as EC2 documents them; `None` for any other.
fn placement(pairs: &[&str], group: Option<&str>, groups: &Mutex<Groups>) -> Option<(u16, String)> {
    const NS: &str = "xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"";
    let mut groups = groups.lock().unwrap();
    let action = pairs.iter().find_map(|p| p.strip_prefix("Action="))?;
    let ok = |action: &str, inner: String| {
        (200, format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response {NS}><requestId>tuneline-front</requestId>{inner}</{action}Response>"))
    };
    match (action, group) {
        ("CreatePlacementGroup", Some(name)) => {
            groups.held.push((name.to_string(), 0));
            Some(ok(action, format!("<placementGroup><groupName>{name}</groupName><state>available</state><strategy>cluster</strategy></placementGroup><return>true</return>")))
        }
        ("DescribePlacementGroups", _) => {
            let items: String = groups
                .held
                .iter()
                .map(|(name, _)| format!("<item><groupName>{name}</groupName><strategy>cluster</strategy><state>available</state></item>"))
                .collect();
            Some(ok(action, format!("<placementGroupSet>{items}</placementGroupSet>")))
        }
        ("DeletePlacementGroup", Some(name)) => {
            groups.held.retain(|(held, _)| held != name);
            Some(ok(action, "<return>true</return>".into()))
        }
        _ => None,
    }
}

/// Answers `request` with `status` and the XML `text`.
fn respond(request: tiny_http::Request, status: u16, text: String) {
    let mut response = tiny_http::Response::from_string(text).with_status_code(status);
    response.add_header(
        tiny_http::Header::from_bytes("Content-Type", "text/xml;charset=UTF-8")
            .expect("a valid header"),
    );
    let _ = request.respond(response);
}

/// `request` sent on to moto with curl; its status and body.
fn forward(request: &tiny_http::Request, body: &str, moto: &str) -> (u16, String) {
    let mut curl = Command::new("curl");
    curl.args([
        "-sS",
        "-m",
        "30",
        "-X",
        &request.method().to_string(),
        "--data-binary",
        "@-",
        "-w",
        "\n%{http_code}",
    ]);
    for header in request.headers().iter().filter(|h| FORWARDED.iter().any(|f| h.field.equiv(f))) {
        curl.args(["-H", &format!("{}: {}", header.field, header.value)]);
    }
    curl.arg(format!("{moto}{}", request.url()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let Ok(mut child) = curl.spawn() else { return (502, "curl did not start".into()) };
    let _ = child.stdin.take().expect("piped").write_all(body.as_bytes());
    let Ok(out) = child.wait_with_output() else { return (502, "curl failed".into()) };
    let text = String::from_utf8_lossy(&out.stdout);
    match text.rsplit_once('\n') {
        Some((body, code)) => (code.trim().parse().unwrap_or(502), body.to_string()),
        None => (502, format!("moto: {}", String::from_utf8_lossy(&out.stderr))),
    }
}
