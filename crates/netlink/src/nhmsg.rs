//! Next-hop object messages (`RTM_NEWNEXTHOP`, `RTM_DELNEXTHOP`, `RTM_GETNEXTHOP`; Linux 5.3,
//! `linux/nexthop.h`), which `netlink-packet-route` 0.34 does not model. They are built here
//! on `netlink-packet-core`'s attribute machinery ([`Nla`], [`NlaBuffer`], [`NlasIterator`]),
//! the way that crate models the other rtnetlink families.
//!
//! ```text
//!  struct nhmsg (8 bytes)                  struct nexthop_grp (8 bytes, NHA_GROUP holds an array)
//!  +--------+--------+----------+-------+  +-------------------+--------+-------------+--------+
//!  | family | scope  | protocol | resvd |  |      id (u32)     | weight | weight_high | resvd  |
//!  +--------+--------+----------+-------+  +-------------------+--------+-------------+--------+
//!  |         nh_flags (u32)             |    weight + 1 is the member's share; weight_high holds
//!  +------------------------------------+    bits 8..15 of it since Linux 6.12 (0 before)
//!  then attributes: NHA_ID (u32), NHA_GROUP, NHA_BLACKHOLE (flag), NHA_OIF (u32),
//!  NHA_GATEWAY (4 or 16 bytes, of nh_family), NHA_ENCAP_TYPE, NHA_ENCAP, NHA_FDB, ...
//! ```

use std::net::IpAddr;

use netlink_packet_core::{
    emit_u16, emit_u32, parse_u16, parse_u32, DecodeError, DefaultNla, Emitable, Nla, NlaBuffer,
    NlasIterator, Parseable,
};

use crate::consts::{NHA_BLACKHOLE, NHA_GATEWAY, NHA_GROUP, NHA_GROUP_TYPE, NHA_ID, NHA_OIF};

/// `sizeof(struct nhmsg)`.
pub const NHMSG_LEN: usize = 8;
/// `sizeof(struct nexthop_grp)`.
pub const NEXTHOP_GRP_LEN: usize = 8;

/// `struct nhmsg`, the fixed part of a next-hop object message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NextHopHeader {
    /// `nh_family`: `AF_INET`/`AF_INET6` for a gateway's family, `AF_UNSPEC` for groups and
    /// blackholes.
    pub family: u8,
    /// `nh_scope` (set by the kernel in replies).
    pub scope: u8,
    /// `nh_protocol`: who installed the object.
    pub protocol: u8,
    /// `nh_flags`: `RTNH_F_*` (`RTNH_F_ONLINK`...).
    pub flags: u32,
}

impl NextHopHeader {
    /// Reads the header at the start of a message's payload.
    pub fn parse(payload: &[u8]) -> Result<Self, DecodeError> {
        match payload.get(..NHMSG_LEN) {
            Some([family, scope, protocol, _resvd, f0, f1, f2, f3]) => Ok(NextHopHeader {
                family: *family,
                scope: *scope,
                protocol: *protocol,
                flags: u32::from_ne_bytes([*f0, *f1, *f2, *f3]),
            }),
            _ => Err(DecodeError::buffer_too_small(payload.len(), NHMSG_LEN)),
        }
    }
}

impl Emitable for NextHopHeader {
    fn buffer_len(&self) -> usize {
        NHMSG_LEN
    }

    /// Writes the header into the first [`NHMSG_LEN`] bytes of `buffer` (which must hold them,
    /// as [`Emitable`] requires); a shorter buffer is left unwritten.
    fn emit(&self, buffer: &mut [u8]) {
        let flags = self.flags.to_ne_bytes();
        let bytes = [
            self.family,
            self.scope,
            self.protocol,
            0,
            flags[0],
            flags[1],
            flags[2],
            flags[3],
        ];
        if let Some(dst) = buffer.get_mut(..NHMSG_LEN) {
            dst.copy_from_slice(&bytes);
        }
    }
}

/// One member of a group (`struct nexthop_grp`), as on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextHopGroupEntry {
    /// The member's next-hop id.
    pub id: u32,
    /// `weight | weight_high << 8`: the member's share minus one.
    pub weight: u16,
}

impl NextHopGroupEntry {
    /// The member's share: the wire value plus one (1..=65,536).
    pub fn share(&self) -> u32 {
        u32::from(self.weight) + 1
    }
}

/// The attributes of a next-hop object message this crate reads or writes; the others are
/// kept as [`DefaultNla`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextHopAttribute {
    /// `NHA_ID`.
    Id(u32),
    /// `NHA_GROUP`.
    Group(Vec<NextHopGroupEntry>),
    /// `NHA_GROUP_TYPE`.
    GroupType(u16),
    /// `NHA_BLACKHOLE`.
    Blackhole,
    /// `NHA_OIF`.
    Oif(u32),
    /// `NHA_GATEWAY` (4 bytes: IPv4, 16 bytes: IPv6).
    Gateway(IpAddr),
    /// Anything else.
    Other(DefaultNla),
}

impl Nla for NextHopAttribute {
    fn value_len(&self) -> usize {
        match self {
            Self::Id(_) | Self::Oif(_) => 4,
            Self::Group(members) => members.len() * NEXTHOP_GRP_LEN,
            Self::GroupType(_) => 2,
            Self::Blackhole => 0,
            Self::Gateway(IpAddr::V4(_)) => 4,
            Self::Gateway(IpAddr::V6(_)) => 16,
            Self::Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            Self::Id(_) => NHA_ID,
            Self::Group(_) => NHA_GROUP,
            Self::GroupType(_) => NHA_GROUP_TYPE,
            Self::Blackhole => NHA_BLACKHOLE,
            Self::Oif(_) => NHA_OIF,
            Self::Gateway(_) => NHA_GATEWAY,
            Self::Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        // `buffer` is exactly `value_len()` bytes (the Emitable contract of `Nla`); the
        // emitters below return an error instead of writing past it.
        match self {
            Self::Id(v) | Self::Oif(v) => {
                let _ = emit_u32(buffer, *v);
            }
            Self::GroupType(v) => {
                let _ = emit_u16(buffer, *v);
            }
            Self::Group(members) => {
                for (slot, m) in buffer.chunks_exact_mut(NEXTHOP_GRP_LEN).zip(members) {
                    let id = m.id.to_ne_bytes();
                    let [low, high] = m.weight.to_le_bytes();
                    slot.copy_from_slice(&[id[0], id[1], id[2], id[3], low, high, 0, 0]);
                }
            }
            Self::Blackhole => {}
            Self::Gateway(IpAddr::V4(a)) => {
                if let Some(dst) = buffer.get_mut(..4) {
                    dst.copy_from_slice(&a.octets());
                }
            }
            Self::Gateway(IpAddr::V6(a)) => {
                if let Some(dst) = buffer.get_mut(..16) {
                    dst.copy_from_slice(&a.octets());
                }
            }
            Self::Other(nla) => nla.emit_value(buffer),
        }
    }
}

/// Reads an `NHA_GROUP` payload: a whole number of entries, at least one.
fn parse_group(payload: &[u8]) -> Result<Vec<NextHopGroupEntry>, DecodeError> {
    if payload.is_empty() || !payload.len().is_multiple_of(NEXTHOP_GRP_LEN) {
        return Err(DecodeError::from(format!(
            "NHA_GROUP of {} bytes is not a non-empty array of {NEXTHOP_GRP_LEN}-byte entries",
            payload.len()
        )));
    }
    Ok(payload
        .chunks_exact(NEXTHOP_GRP_LEN)
        .filter_map(|e| match e {
            [i0, i1, i2, i3, low, high, _, _] => Some(NextHopGroupEntry {
                id: u32::from_ne_bytes([*i0, *i1, *i2, *i3]),
                weight: u16::from_le_bytes([*low, *high]),
            }),
            _ => None,
        })
        .collect())
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for NextHopAttribute {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let payload = buf.value();
        Ok(match buf.kind() {
            NHA_ID => Self::Id(parse_u32(payload)?),
            NHA_OIF => Self::Oif(parse_u32(payload)?),
            NHA_GROUP_TYPE => Self::GroupType(parse_u16(payload)?),
            NHA_BLACKHOLE => Self::Blackhole,
            NHA_GROUP => Self::Group(parse_group(payload)?),
            NHA_GATEWAY => Self::Gateway(netlink_packet_core::parse_ip(payload)?),
            _ => Self::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// A whole next-hop object message: header and attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NextHopMessage {
    /// `struct nhmsg`.
    pub header: NextHopHeader,
    /// The attributes, in order.
    pub attributes: Vec<NextHopAttribute>,
}

impl Emitable for NextHopMessage {
    fn buffer_len(&self) -> usize {
        NHMSG_LEN + self.attributes.as_slice().buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        self.header.emit(buffer);
        if let Some(rest) = buffer.get_mut(NHMSG_LEN..) {
            self.attributes.as_slice().emit(rest);
        }
    }
}

impl Parseable<[u8]> for NextHopMessage {
    fn parse(buf: &[u8]) -> Result<Self, DecodeError> {
        let header = NextHopHeader::parse(buf)?;
        let mut attributes = Vec::new();
        for nla in NlasIterator::new(buf.get(NHMSG_LEN..).unwrap_or_default()) {
            attributes.push(NextHopAttribute::parse(&nla?)?);
        }
        Ok(NextHopMessage { header, attributes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn message_emits_and_parses_back() {
        let msg = NextHopMessage {
            header: NextHopHeader {
                family: crate::consts::AF_INET,
                scope: 0,
                protocol: 4,
                flags: 4,
            },
            attributes: vec![
                NextHopAttribute::Id(5),
                NextHopAttribute::Oif(3),
                NextHopAttribute::Gateway(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2))),
                NextHopAttribute::Group(vec![
                    NextHopGroupEntry { id: 1, weight: 0 },
                    NextHopGroupEntry { id: 2, weight: 300 },
                ]),
                NextHopAttribute::Blackhole,
            ],
        };
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.emit(&mut buf);
        // 8 header + id 8 + oif 8 + gateway 8 + group 4+16 + blackhole 4
        assert_eq!(buf.len(), 8 + 8 + 8 + 8 + 20 + 4);
        // weight 300 = 0x12c: low byte 0x2c, high byte 0x01
        assert_eq!(&buf[44..52], &[2, 0, 0, 0, 0x2c, 0x01, 0, 0]);
        assert_eq!(NextHopMessage::parse(&buf[..]).unwrap(), msg);
    }

    #[test]
    fn group_of_a_partial_entry_is_refused() {
        assert!(parse_group(&[1, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(parse_group(&[]).is_err());
        assert_eq!(
            parse_group(&[7, 0, 0, 0, 2, 0, 0, 0]).unwrap(),
            vec![NextHopGroupEntry { id: 7, weight: 2 }]
        );
    }

    #[test]
    fn short_header_is_refused() {
        assert!(NextHopHeader::parse(&[2, 0, 4, 0, 0, 0, 0]).is_err());
    }
}
