/* Tally tracker, see README.md "Tracking a site". Queue: window.tally=window.tally||function(){(tally.q=tally.q||[]).push(arguments)} */
((w,d,l,s)=>{let D=s.dataset,q=w.tally?.q||[],a=D.api||new URL("/api/event",s.src).href,z,
t=(n,o={})=>{let p=o.props,b,i
try{i=localStorage.tally_ignore=="true"}catch{}
if(!i&&("allowLocal"in D||!(/^(localhost|127[\d.]+|\[::1\]|)$/.test(l.hostname)||navigator.webdriver))){
b=JSON.stringify({n,u:l.href,d:D.site||l.hostname,r:d.referrer,w:w.innerWidth,p,$:o.revenue,h:"hash"in D?1:void 0,i:crypto.randomUUID?.()||([1e7]+-1e3+-4e3+-8e3+-1e11).replace(/[018]/g,c=>(c^crypto.getRandomValues(new Uint8Array(1))[0]&15>>c/4).toString(16))},function(k,v){return this==p?""+v:v})
f(b,0)}
o.callback?.()},
f=(b,k)=>fetch(a,{method:"POST",body:b,keepalive:!0}).then(r=>{if(r.status==503||r.status==408)throw 0}).catch(()=>k<2&&setTimeout(f,1e3<<2*k,b,k+1)),
v=()=>{let h=l.pathname+("hash"in D?l.hash:"");h!=z&&(z=h,t("pageview"))},
c=e=>{let k=e.target.closest("a"),n=k&&e.button<2&&("outbound"in D&&k.host&&k.host!=l.host?"Outbound Link: Click":"downloads"in D&&/\.(pdf|(doc|xls|ppt)x?|csv|zip|gz|dmg|pkg|exe|msi|apk|mp[34])$/i.test(k.pathname)&&"File Download")
n&&t(n,{props:{url:k.href}})}
for(let m of["pushState","replaceState"]){let f=history[m];history[m]=function(){f.apply(this,arguments);v()}}
w.addEventListener("popstate",v);w.addEventListener("hashchange",v);d.addEventListener("click",c);d.addEventListener("auxclick",c)
d.prerendering?d.addEventListener("prerenderingchange",v):v()
w.tally=t;for(let x of q)t(...x)})(window,document,location,document.currentScript)
