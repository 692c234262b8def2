/* Tally tracker. Attributes: data-site, data-api (default: src origin/api/event), data-hash, data-outbound,
 data-downloads, data-allow-local (localhost, automation). tally(name,{props,callback}); calls before load
 queue with window.tally=window.tally||function(){(tally.q=tally.q||[]).push(arguments)}. Opt-out: localStorage.tally_ignore="true" */
((w,d,l,s)=>{let D=s.dataset,q=w.tally?.q||[],a=D.api||new URL("/api/event",s.src).href,z,
t=(n,o={})=>{let p=o.props,b,i
try{i=localStorage.tally_ignore=="true"}catch{}
if(!i&&("allowLocal"in D||!(/^(localhost|127[\d.]+|\[::1\]|)$/.test(l.hostname)||navigator.webdriver))){
b=JSON.stringify({n,u:l.href,d:D.site||l.hostname,r:d.referrer,w:w.innerWidth,p,h:"hash"in D?1:void 0},function(k,v){return this==p?""+v:v})
navigator.sendBeacon(a,b)||fetch(a,{method:"POST",body:b,keepalive:!0}).catch(()=>{})}
o.callback?.()},
v=()=>{let h=l.pathname+("hash"in D?l.hash:"");h!=z&&(z=h,t("pageview"))},
c=e=>{let k=e.target.closest("a"),n=k&&e.button<2&&("outbound"in D&&k.host&&k.host!=l.host?"Outbound Link: Click":"downloads"in D&&/\.(pdf|(doc|xls|ppt)x?|csv|zip|gz|dmg|pkg|exe|msi|apk|mp[34])$/i.test(k.pathname)&&"File Download")
n&&t(n,{props:{url:k.href}})}
for(let m of["pushState","replaceState"]){let f=history[m];history[m]=function(){f.apply(this,arguments);v()}}
w.addEventListener("popstate",v);w.addEventListener("hashchange",v);d.addEventListener("click",c);d.addEventListener("auxclick",c)
d.prerendering?d.addEventListener("prerenderingchange",v):v()
w.tally=t;for(let x of q)t(...x)})(window,document,location,document.currentScript)
