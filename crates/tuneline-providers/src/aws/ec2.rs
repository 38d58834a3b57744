//! The EC2 Query API calls tuneline makes, signed with SigV4 by the
//! `aws-sigv4` crate and sent with reqwest. Not aws-sdk-ec2: its build is
//! heavy for four calls whose shapes are fixed by the API's 2016-11-15 version.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use serde::Deserialize;

/// The API version every call names.
const VERSION: &str = "2016-11-15";

/// A failed call: EC2's own error code and message, or what failed on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Ec2Error {
    /// EC2's error code (`InsufficientInstanceCapacity`, `AuthFailure`, ...), empty for a transport error.
    pub code: String,
    /// What EC2 (or the transport) said.
    pub message: String,
}

impl std::fmt::Display for Ec2Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.code.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

impl Ec2Error {
    fn transport(message: String) -> Self {
        Self { code: String::new(), message }
    }

    /// EC2 has no capacity for the request now: no one's fault, try elsewhere or later.
    pub fn is_capacity(&self) -> bool {
        matches!(
            self.code.as_str(),
            "InsufficientInstanceCapacity"
                | "InsufficientCapacity"
                | "SpotMaxPriceTooLow"
                | "MaxSpotInstanceCountExceeded"
        )
    }
}

/// An EC2 endpoint in one region, with the credentials that sign its calls.
pub struct Ec2 {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    credentials: Credentials,
}

/// An instance, as DescribeInstances and RunInstances give it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ec2Instance {
    /// EC2's id, `i-...`.
    pub instance_id: String,
    /// Its instance type (`g5.xlarge`).
    #[serde(default)]
    pub instance_type: String,
    /// Its state: pending, running, stopping, terminated.
    pub instance_state: State,
    /// When it was launched, RFC 3339.
    #[serde(default)]
    pub launch_time: String,
    /// Its tags: the plane's and the worker's.
    #[serde(default)]
    pub tag_set: Items<Tag>,
    /// `spot` for a spot instance, absent for on-demand.
    #[serde(default)]
    pub instance_lifecycle: Option<String>,
}

impl Ec2Instance {
    /// The value of tag `key`.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tag_set.item.iter().find(|t| t.key == key).map(|t| t.value.as_str())
    }

    /// Seconds since the epoch of its launch (0 if EC2 gave none it could read).
    pub fn launched_at(&self) -> f64 {
        chrono::DateTime::parse_from_rfc3339(&self.launch_time)
            .map_or(0.0, |t| t.timestamp_millis() as f64 / 1000.0)
    }
}

/// An instance's state.
#[derive(Debug, Clone, Deserialize)]
pub struct State {
    /// `pending`, `running`, `shutting-down`, `terminated`, `stopping` or `stopped`.
    pub name: String,
}

/// One EC2 tag, as DescribeInstances lists it.
#[derive(Debug, Clone, Deserialize)]
pub struct Tag {
    /// The tag's name (`tuneline-plane`).
    pub key: String,
    /// The tag's value.
    #[serde(default)]
    pub value: String,
}

/// An EC2 `<...Set>` of `<item>`s.
#[derive(Debug, Clone, Deserialize)]
pub struct Items<T> {
    /// The `<item>` elements of an EC2 XML list.
    #[serde(default = "Vec::new")]
    pub item: Vec<T>,
}

impl<T> Default for Items<T> {
    fn default() -> Self {
        Self { item: Vec::new() }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reservation {
    #[serde(default)]
    instances_set: Items<Ec2Instance>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DescribeInstances {
    #[serde(default)]
    reservation_set: Items<Reservation>,
    #[serde(default)]
    next_token: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Terminated {
    instance_id: String,
    current_state: State,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DescribePlacementGroups {
    #[serde(default)]
    placement_group_set: Items<PlacementGroup>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlacementGroup {
    group_name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TerminateInstances {
    #[serde(default)]
    instances_set: Items<Terminated>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpotPrice {
    spot_price: String,
    #[serde(default)]
    timestamp: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpotPriceHistory {
    #[serde(default)]
    spot_price_history_set: Items<SpotPrice>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ErrorResponse {
    errors: ErrorList,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ErrorList {
    error: Vec<ErrorEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ErrorEntry {
    code: String,
    message: String,
}

/// What RunInstances launches.
pub struct RunRequest<'a> {
    /// The AMI launched (`ami-...`).
    pub image: &'a str,
    /// The instance type.
    pub instance_type: &'a str,
    /// A one-time spot instance, terminated on interruption.
    pub spot: bool,
    /// The boot script, as user data (base64-encoded here).
    pub user_data: &'a str,
    /// Tags on the instance.
    pub tags: &'a [(&'a str, &'a str)],
    /// The instance profile (its role's credentials reach the instance through its metadata).
    pub instance_profile: Option<&'a str>,
    /// The placement group it joins (a gang's), if any.
    pub placement_group: Option<&'a str>,
}

impl Ec2 {
    /// EC2 in `region` at `endpoint` (default `https://ec2.<region>.amazonaws.com/`).
    pub fn new(
        region: &str,
        endpoint: Option<&str>,
        credentials: Credentials,
    ) -> Result<Self, crate::json_api::NoClient> {
        let endpoint = endpoint.map_or_else(
            || format!("https://ec2.{region}.amazonaws.com/"),
            |e| format!("{}/", e.trim_end_matches('/')),
        );
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .timeout(std::time::Duration::from_secs(60))
            .build()?;
        Ok(Self { http, endpoint, region: region.to_string(), credentials })
    }

    /// Where its calls go.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Launches one instance; returns it as EC2 reports it.
    pub async fn run_instance(&self, run: &RunRequest<'_>) -> Result<Ec2Instance, Ec2Error> {
        use base64::Engine;
        let mut params = vec![
            ("ImageId".to_string(), run.image.to_string()),
            ("InstanceType".into(), run.instance_type.to_string()),
            ("MinCount".into(), "1".into()),
            ("MaxCount".into(), "1".into()),
            ("UserData".into(), base64::engine::general_purpose::STANDARD.encode(run.user_data)),
            // Shutting down from inside (the worker's self-stop) terminates: nothing is left stopped and billing storage.
            ("InstanceInitiatedShutdownBehavior".into(), "terminate".into()),
            ("TagSpecification.1.ResourceType".into(), "instance".into()),
        ];
        for (i, (key, value)) in run.tags.iter().enumerate() {
            params.push((format!("TagSpecification.1.Tag.{}.Key", i + 1), key.to_string()));
            params.push((format!("TagSpecification.1.Tag.{}.Value", i + 1), value.to_string()));
        }
        if let Some(profile) = run.instance_profile {
            params.push(("IamInstanceProfile.Name".into(), profile.to_string()));
        }
        if let Some(group) = run.placement_group {
            params.push(("Placement.GroupName".into(), group.to_string()));
        }
        if run.spot {
            params.push(("InstanceMarketOptions.MarketType".into(), "spot".into()));
            params.push((
                "InstanceMarketOptions.SpotOptions.SpotInstanceType".into(),
                "one-time".into(),
            ));
            params.push((
                "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior".into(),
                "terminate".into(),
            ));
        }
        let reservation: Reservation = parse(&self.call("RunInstances", &params).await?)?;
        reservation
            .instances_set
            .item
            .into_iter()
            .next()
            .ok_or_else(|| Ec2Error::transport("RunInstances answered with no instance".into()))
    }

    /// The instances carrying tag `key` = `value`, in any of `states`, every page.
    pub async fn describe_tagged(
        &self,
        key: &str,
        value: &str,
        states: &[&str],
    ) -> Result<Vec<Ec2Instance>, Ec2Error> {
        let mut params = vec![
            ("Filter.1.Name".to_string(), format!("tag:{key}")),
            ("Filter.1.Value.1".into(), value.to_string()),
        ];
        params.push(("Filter.2.Name".into(), "instance-state-name".into()));
        for (i, state) in states.iter().enumerate() {
            params.push((format!("Filter.2.Value.{}", i + 1), state.to_string()));
        }
        let mut instances = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut page = params.clone();
            if let Some(t) = &token {
                page.push(("NextToken".into(), t.clone()));
            }
            let answer: DescribeInstances = parse(&self.call("DescribeInstances", &page).await?)?;
            instances
                .extend(answer.reservation_set.item.into_iter().flat_map(|r| r.instances_set.item));
            match answer.next_token.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => return Ok(instances),
            }
        }
    }

    /// Terminates `ids`; returns each one's state after the call.
    pub async fn terminate(&self, ids: &[String]) -> Result<Vec<(String, String)>, Ec2Error> {
        let params: Vec<(String, String)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (format!("InstanceId.{}", i + 1), id.clone()))
            .collect();
        let answer: TerminateInstances = parse(&self.call("TerminateInstances", &params).await?)?;
        Ok(answer
            .instances_set
            .item
            .into_iter()
            .map(|t| (t.instance_id, t.current_state.name))
            .collect())
    }

    /// Creates placement group `name` of the `cluster` strategy: its
    /// instances are packed close together, on one low-latency network.
    pub async fn create_placement_group(&self, name: &str) -> Result<(), Ec2Error> {
        let params = vec![
            ("GroupName".to_string(), name.to_string()),
            ("Strategy".into(), "cluster".into()),
        ];
        self.call("CreatePlacementGroup", &params).await.map(|_| ())
    }

    /// The names of this account's placement groups that start with `prefix`.
    pub async fn placement_groups(&self, prefix: &str) -> Result<Vec<String>, Ec2Error> {
        let answer: DescribePlacementGroups =
            parse(&self.call("DescribePlacementGroups", &[]).await?)?;
        Ok(answer
            .placement_group_set
            .item
            .into_iter()
            .map(|g| g.group_name)
            .filter(|name| name.starts_with(prefix))
            .collect())
    }

    /// Deletes placement group `name` (EC2 refuses while instances are in it).
    pub async fn delete_placement_group(&self, name: &str) -> Result<(), Ec2Error> {
        self.call("DeletePlacementGroup", &[("GroupName".to_string(), name.to_string())])
            .await
            .map(|_| ())
    }

    /// The lowest current Linux spot price of `instance_type` across this
    /// region's zones, dollars per hour, and its time, if EC2 has one.
    pub async fn spot_price(&self, instance_type: &str) -> Result<Option<(f64, String)>, Ec2Error> {
        let params = vec![
            ("InstanceType.1".to_string(), instance_type.to_string()),
            ("ProductDescription.1".into(), "Linux/UNIX".into()),
            (
                "StartTime".into(),
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ),
        ];
        let answer: SpotPriceHistory =
            parse(&self.call("DescribeSpotPriceHistory", &params).await?)?;
        let prices = answer
            .spot_price_history_set
            .item
            .into_iter()
            .filter_map(|p| Some((p.spot_price.parse::<f64>().ok()?, p.timestamp)));
        Ok(prices.min_by(|a, b| a.0.total_cmp(&b.0)))
    }

    /// One signed call: `Action` with `params`, form-encoded; the response body.
    async fn call(&self, action: &str, params: &[(String, String)]) -> Result<String, Ec2Error> {
        let body = {
            // Dropped before any await: the serializer is not Send.
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("Action", action).append_pair("Version", VERSION);
            for (key, value) in params {
                form.append_pair(key, value);
            }
            form.finish()
        };
        let content_type = ("content-type", "application/x-www-form-urlencoded; charset=utf-8");
        let identity = self.credentials.clone().into();
        let signing = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("ec2")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| Ec2Error::transport(format!("cannot sign {action}: {e}")))?
            .into();
        let signable = SignableRequest::new(
            "POST",
            self.endpoint.as_str(),
            [content_type].into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|e| {
            Ec2Error::transport(format!("cannot sign {action} for {}: {e}", self.endpoint))
        })?;
        let (instructions, _) = sign(signable, &signing)
            .map_err(|e| Ec2Error::transport(format!("cannot sign {action}: {e}")))?
            .into_parts();
        let mut request =
            self.http.post(&self.endpoint).header(content_type.0, content_type.1).body(body);
        for (name, value) in instructions.headers() {
            request = request.header(name, value);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Ec2Error::transport(format!("{action} at {}: {e}", self.endpoint)))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| Ec2Error::transport(format!("{action} at {}: {e}", self.endpoint)))?;
        if status.is_success() {
            return Ok(text);
        }
        match quick_xml::de::from_str::<ErrorResponse>(&text) {
            Ok(e) if !e.errors.error.is_empty() => {
                let first = e.errors.error.into_iter().next().expect("not empty");
                Err(Ec2Error { code: first.code, message: first.message })
            }
            _ => Err(Ec2Error::transport(format!(
                "{action} answered HTTP {status}: {}",
                text.chars().take(300).collect::<String>()
            ))),
        }
    }
}

/// The first of `states` (instance, state after TerminateInstances) that is
/// neither shutting down nor terminated: an instance that may still bill.
pub fn not_ending(states: &[(String, String)]) -> Option<&(String, String)> {
    states.iter().find(|(_, state)| state != "shutting-down" && state != "terminated")
}

/// A response body as `T`, or what was wrong with it.
fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, Ec2Error> {
    quick_xml::de::from_str(text).map_err(|e| {
        Ec2Error::transport(format!(
            "a malformed EC2 answer ({e}): {}",
            text.chars().take(300).collect::<String>()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_instances_answers_parse_with_tags_states_and_pages() {
        let text = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>r-1</requestId>
  <reservationSet>
    <item>
      <reservationId>r-abc</reservationId>
      <instancesSet>
        <item>
          <instanceId>i-0123</instanceId>
          <instanceType>g5.xlarge</instanceType>
          <instanceState><code>16</code><name>running</name></instanceState>
          <launchTime>2026-12-01T10:00:00.000Z</launchTime>
          <tagSet><item><key>tuneline-plane</key><value>tlabc</value></item><item><key>Name</key><value>w1</value></item></tagSet>
        </item>
      </instancesSet>
    </item>
  </reservationSet>
  <nextToken>page-2</nextToken>
</DescribeInstancesResponse>"#;
        let answer: DescribeInstances = parse(text).unwrap();
        let instance = &answer.reservation_set.item[0].instances_set.item[0];
        assert_eq!(instance.instance_id, "i-0123");
        assert_eq!(instance.instance_state.name, "running");
        assert_eq!(instance.tag("Name"), Some("w1"));
        assert_eq!(instance.launched_at(), 1_796_119_200.0);
        assert_eq!(answer.next_token.as_deref(), Some("page-2"));
        let empty: DescribeInstances =
            parse("<DescribeInstancesResponse><reservationSet/></DescribeInstancesResponse>")
                .unwrap();
        assert!(empty.reservation_set.item.is_empty() && empty.next_token.is_none());
    }

    #[test]
    fn error_answers_keep_ec2s_code_and_message() {
        let text = "<Response><Errors><Error><Code>InsufficientInstanceCapacity</Code><Message>We currently do not have sufficient g5.xlarge capacity</Message></Error></Errors><RequestID>x</RequestID></Response>";
        let e: ErrorResponse = quick_xml::de::from_str(text).unwrap();
        let e = Ec2Error {
            code: e.errors.error[0].code.clone(),
            message: e.errors.error[0].message.clone(),
        };
        assert!(e.is_capacity());
        assert_eq!(
            e.to_string(),
            "InsufficientInstanceCapacity: We currently do not have sufficient g5.xlarge capacity"
        );
        assert!(parse::<DescribeInstances>("<not xml")
            .err()
            .unwrap()
            .message
            .starts_with("a malformed EC2 answer"));
    }
}
