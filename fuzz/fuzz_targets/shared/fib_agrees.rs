//! The check fuzz targets that change a RIB end with: for every route of the FIB as the RIB
//! computes it, the published FIB answers what a plain map of those routes answers.

use vfsr_lpm::{Key, Lpm, LpmUpdate, Route, RouteMap};
use vfsr_rib::RouteTable;

/// Asserts that both published FIBs of `t` answer what its RIB says.
pub fn assert_fib_agrees<E4, E6>(t: &RouteTable<E4, E6>)
where
    E4: LpmUpdate<u32> + Clone,
    E6: LpmUpdate<u128> + Clone,
{
    let (r4, r6, _) = t.readers();
    agrees(&r4.load().engine, &t.rib().fib_routes_v4());
    agrees(&r6.load().engine, &t.rib().fib_routes_v6());
}

fn agrees<K: Key, E: Lpm<K>>(engine: &E, routes: &[Route<K>]) {
    let map = RouteMap::from_routes(routes);
    for r in routes {
        let want = map.lookup(r.prefix.addr()).map_or(0, |w| w.nexthop);
        assert_eq!(engine.lookup(r.prefix.addr()), want, "{:?}", r.prefix);
    }
}
