//! Module `a::b`: `super::super` is the root, so this names `loop_`.

pub(in crate::a) fn back() {
    super::super::loop_::spin();
}
